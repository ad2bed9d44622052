import { type Job, Queue, type Worker } from "bullmq";
import { createRouter, type WebhookEvent, type WebhookReply } from "flag-webhooks";
import { type EventJob, enqueueTo, processEvents } from "flag-webhooks/bullmq";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { describe, expectTypeOf, it } from "vitest";

const connection = { host: "127.0.0.1", port: 6379 };

describe("flag-webhooks/bullmq types", () => {
  it("gives an onEvent that fits every adapter", () => {
    const onEvent = enqueueTo(new Queue("flag-events", { connection }));
    expectTypeOf(onEvent).toEqualTypeOf<(event: WebhookEvent) => Promise<WebhookReply>>();
    webhookHandler({ secret: "s", onEvent });
    expressMiddleware({ secret: "s", onEvent });
    koaMiddleware({ secret: "s", onEvent });
    // A queue typed for its data fits too.
    enqueueTo(new Queue<WebhookEvent>("flag-events", { connection }), { timeout: "2s", job: { attempts: 3 } });
  });

  it("hands the worker's onEvent the typed event and its job, and returns the Worker", () => {
    const worker = processEvents({
      queue: "flag-events",
      connection,
      concurrency: 5,
      onEvent: (event, job) => {
        expectTypeOf(job).toEqualTypeOf<EventJob>();
        expectTypeOf(job).toExtend<Job<WebhookEvent>>();
        if (event.type === "flag.updated") expectTypeOf(event.data.flag).toEqualTypeOf<string>();
        if (event.type === "unknown") expectTypeOf(event.originalType).toEqualTypeOf<string>();
      },
    });
    expectTypeOf(worker).toEqualTypeOf<Worker<WebhookEvent>>();
  });

  it("takes a router, with or without the job as context", () => {
    processEvents({ queue: "q", connection, onEvent: createRouter().on("flag.created", () => {}) });
    processEvents({
      queue: "q",
      connection,
      onEvent: createRouter<[job: EventJob]>().on("flag.updated", (event, job) => {
        expectTypeOf(event.data.changes).toBeArray();
        expectTypeOf(job.attemptsMade).toEqualTypeOf<number>();
      }),
    });
    // @ts-expect-error a misspelt event type does not compile
    createRouter<[job: EventJob]>().on("flag.updatd", () => {});
  });
});
