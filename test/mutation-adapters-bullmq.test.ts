import { createHmac } from "node:crypto";
import { context, propagation, trace } from "@opentelemetry/api";
import { type Telemetry as BullTelemetry, type Job, Queue, type QueueOptions } from "bullmq";
import { WebhookError, type WebhookEvent } from "flag-webhooks";
import { enqueueTo, eventJobId, processEvents } from "flag-webhooks/bullmq";
import { webhookHandler } from "flag-webhooks/fetch";
import { openTelemetry } from "flag-webhooks/otel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Sdk, startSdk } from "./support/otel.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "./support/redis-server.js";

// enqueueTo and processEvents in this process, on a real redis-server, in seconds: the values a
// user sees in Redis (job name, id, options), the answers and errors, and what a worker does
// with each job. (test/bullmq.test.ts runs the same hand-off end to end with worker processes.)
// Everything from src/ is made inside the tests, so a mutant of it is run by the tests it changes.
const availability = redisAvailability();
const SECRET = "mutation-bullmq-secret";
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

function event(id: string, type = "flag.updated"): WebhookEvent {
  return {
    id,
    type,
    createdAt: new Date().toISOString(),
    environment: "staging",
    data: { flag: "f", changes: [], actor: { type: "user", email: "a@example.com" } },
  } as WebhookEvent;
}

async function until<T>(get: () => Promise<T | undefined> | T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await get();
    if (value !== undefined) return value;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A Queue to port 1, where nothing listens: BullMQ's client keeps reconnecting, add never settles. */
function unreachableQueue(): Queue {
  const queue = new Queue("nowhere", { connection: { host: "127.0.0.1", port: 1 } });
  queue.on("error", () => {});
  return queue;
}

async function enqueueError(enqueue: (event: WebhookEvent) => Promise<unknown>, id: string): Promise<WebhookError> {
  const error = await enqueue(event(id)).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(WebhookError);
  return error as WebhookError;
}

describe("enqueueTo without Redis answering", () => {
  it("answers store_unavailable after the timeout given in ms, naming it in the cause", async () => {
    const queue = unreachableQueue();
    try {
      const error = await enqueueError(enqueueTo(queue, { timeout: 50 }), "evt_ms");
      expect([error.code, error.status, error.message]).toEqual([
        "store_unavailable",
        503,
        "the event queue is unavailable; retry later",
      ]);
      expect((error.cause as Error).message).toBe("Redis did not acknowledge the job within 50 ms");
    } finally {
      await queue.close().catch(() => {});
    }
  });

  it("takes the timeout as a duration, and waits 3 s by default", async () => {
    const queue = unreachableQueue();
    try {
      const given = await enqueueError(enqueueTo(queue, { timeout: "0.1s" }), "evt_duration");
      expect((given.cause as Error).message).toBe("Redis did not acknowledge the job within 100 ms");
      const byDefault = await enqueueError(enqueueTo(queue), "evt_default");
      expect((byDefault.cause as Error).message).toBe("Redis did not acknowledge the job within 3000 ms");
    } finally {
      await queue.close().catch(() => {});
    }
  }, 10_000);

  it("answers store_unavailable with BullMQ's own error as the cause when the add fails", async () => {
    const queue = unreachableQueue();
    await queue.close().catch(() => {});
    const error = await enqueueError(enqueueTo(queue, { timeout: 2000 }), "evt_closed");
    expect(error.code).toBe("store_unavailable");
    expect((error.cause as Error).message).not.toMatch(/did not acknowledge/);
  });

  it("names the function whose scope is wrong, and checks processEvents' queue and onEvent when it is made", () => {
    const queue = unreachableQueue();
    expect(() => enqueueTo(queue, { scope: "a/b" })).toThrow(/^flag-webhooks: option "scope" of enqueueTo must be/);
    expect(() => eventJobId("x", "a b")).toThrow(/^flag-webhooks: option "scope" of eventJobId must be/);
    void queue.close().catch(() => {});
    const queueMessage = 'flag-webhooks: option "queue" must be the name of the BullMQ queue';
    for (const name of ["", 7, undefined]) {
      expect(() => processEvents({ queue: name as never, connection: {}, onEvent() {} })).toThrow(
        new TypeError(queueMessage),
      );
    }
    expect(() => processEvents({ queue: "q", connection: {}, onEvent: "handler" as never })).toThrow(
      new TypeError('flag-webhooks: option "onEvent" must be a function'),
    );
    expect(() => processEvents(undefined as never)).toThrow(new TypeError(queueMessage));
  });

  it("checks the timeout when it is made", () => {
    const queue = unreachableQueue();
    expect(() => enqueueTo(queue, { timeout: "later" })).toThrow(/"timeout"/);
    expect(() => enqueueTo(null as never)).toThrow("flag-webhooks: enqueueTo(queue) needs a BullMQ Queue");
    void queue.close().catch(() => {});
  });
});

describe.skipIf(!availability.available)("enqueueTo and processEvents on a real redis-server", () => {
  let redis: RedisServer;
  let sdk: Sdk;
  const queues: Queue[] = [];
  const connection = () => ({ host: "127.0.0.1", port: redis.port });
  const queue = (name: string, opts: Omit<QueueOptions, "connection"> = {}) => {
    const one = new Queue(name, { connection: connection(), ...opts });
    queues.push(one);
    return one;
  };

  beforeAll(async () => {
    sdk = startSdk();
    redis = await startRedis();
  }, 30_000);
  afterAll(async () => {
    await Promise.all(queues.map((one) => one.close().catch(() => {})));
    await stopRedis(redis);
    await sdk?.shutdown();
  });

  it("adds each event as a job named after its type, under its job id, with the default options, and answers 202", async () => {
    const q = queue("defaults");
    const reply = await enqueueTo(q)(event("evt:1%", "flag.deleted"));
    expect(reply).toEqual({ status: 202 });
    const job = (await q.getJob("event-evt%3A1%25")) as Job;
    expect([job.name, job.id, job.data.id]).toEqual(["flag.deleted", "event-evt%3A1%25", "evt:1%"]);
    expect(job.opts).toMatchObject({
      attempts: 5,
      backoff: { type: "exponential", delay: 1000 },
      removeOnComplete: { age: 86_400 },
      removeOnFail: false,
    });
    // No telemetry option: nothing but the event travels with the job.
    expect(job.opts.telemetry).toBeUndefined();
  });

  it("puts the queue's defaultJobOptions over the defaults, and the given job options over both, but never a jobId", async () => {
    const q = queue("layered", { defaultJobOptions: { attempts: 2, priority: 3 } });
    await enqueueTo(q, { scope: "audit-app", job: { priority: 7, jobId: "mine" } as never })(event("evt_layered"));
    const job = (await q.getJob(eventJobId("evt_layered", "audit-app"))) as Job;
    expect(job.id).toBe("@audit-app/event-evt_layered");
    expect(job.opts).toMatchObject({ attempts: 2, priority: 7, removeOnFail: false });
    expect(await q.getJob("mine")).toBeUndefined();
  });

  it("carries the active trace context in opts.telemetry.metadata, keeping the job's own telemetry options", async () => {
    const q = queue("traced");
    const telemetry = openTelemetry();
    const span = trace.getTracer("test").startSpan("parent");
    const sent = event("evt_traced");
    await context.with(trace.setSpan(context.active(), span), () =>
      enqueueTo(q, { telemetry, job: { telemetry: { omitContext: true } } })(sent),
    );
    span.end();
    const job = (await q.getJob("event-evt_traced")) as Job;
    expect(job.opts.telemetry?.omitContext).toBe(true);
    const carrier = JSON.parse(job.opts.telemetry?.metadata as string);
    expect(carrier.traceparent).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
    expect(job.data).toEqual(sent);
    // Outside any span there is no context to carry: the options are left as they are.
    await enqueueTo(q, { telemetry })(event("evt_untraced"));
    expect(((await q.getJob("event-evt_untraced")) as Job).opts.telemetry).toBeUndefined();
  });

  it("hands the worker's onEvent the validated event and its job, and a fetch receiver's delivery reaches it", async () => {
    const q = queue("through");
    const seen: string[] = [];
    const worker = processEvents({
      queue: "through",
      connection: connection(),
      onEvent: (e, job) => void seen.push(`${job.id} ${e.type} ${e.environment}`),
    });
    worker.on("error", () => {});
    try {
      const handler = webhookHandler({ secret: SECRET, onEvent: enqueueTo(q) });
      const body = JSON.stringify(event("evt_through"));
      const response = await handler(
        new Request("http://localhost/webhooks", {
          method: "POST",
          headers: { "service-signature": createHmac("sha256", SECRET).update(body).digest("hex") },
          body,
        }),
      );
      expect(response.status).toBe(202);
      expect(await until(() => seen[0], "the job")).toBe("event-evt_through flag.updated staging");
      // The worker's options are BullMQ's: no telemetry of ours is passed on.
      expect(worker.opts.telemetry).toBeUndefined();
    } finally {
      await worker.close();
    }
  });

  it("fails a job with type unknown at once, with the reason, when originalType is missing or not a string", async () => {
    const q = queue("unknown-types");
    const seen: string[] = [];
    const worker = processEvents({
      queue: "unknown-types",
      connection: connection(),
      onEvent: (e) => void seen.push(`${e.id} ${e.type}`),
    });
    worker.on("error", () => {});
    try {
      const base = event("x");
      await q.add("unknown", { ...base, id: "no_original", type: "unknown" }, { jobId: "no_original", attempts: 3 });
      await q.add("unknown", { ...base, id: "num_original", type: "unknown", originalType: 7 }, { jobId: "num" });
      await q.add(
        "unknown",
        { ...base, id: "known", type: "unknown", originalType: "flag.deleted" },
        { jobId: "known" },
      );
      await q.add("unknown", null as never, { jobId: "null" });
      await q.add(
        "unknown",
        { ...base, id: "kept", type: "unknown", originalType: "flag.archived" },
        { jobId: "kept" },
      );
      const failed = await until(async () => {
        const jobs = await q.getFailed();
        return jobs.length === 4 ? jobs : undefined;
      }, "four failed jobs");
      const reason = "does not hold a valid flag-webhooks event:";
      expect(failed.map((job) => [job.id, job.attemptsMade, job.failedReason]).sort()).toEqual([
        ["known", 1, `job known ${reason} type is "unknown" but originalType is the known type "flag.deleted"`],
        ["no_original", 1, `job no_original ${reason} originalType must be a string`],
        ["null", 1, `job null ${reason} body must be an object`],
        ["num", 1, `job num ${reason} originalType must be a string`],
      ]);
      expect(await until(() => seen[0], "the kept job")).toBe("kept unknown");
    } finally {
      await worker.close();
    }
  });

  it("passes BullMQ's own telemetry on to the Worker, and keeps ours to itself", async () => {
    queue("options");
    // BullMQ's Telemetry interface (what bullmq-otel implements), recording nothing.
    const span = {
      setSpanOnContext: (c: unknown) => c,
      setAttribute() {},
      setAttributes() {},
      addEvent() {},
      recordException() {},
      end() {},
    };
    const theirs = {
      tracer: { startSpan: () => span },
      contextManager: {
        with: (_c: unknown, fn: () => unknown) => fn(),
        active: () => ({}),
        getMetadata: () => "",
        fromMetadata: (c: unknown) => c,
      },
    } as unknown as BullTelemetry;
    const passed = processEvents({
      queue: "options",
      connection: connection(),
      autorun: false,
      onEvent() {},
      telemetry: theirs,
    });
    const ours = processEvents({
      queue: "options",
      connection: connection(),
      autorun: false,
      onEvent() {},
      telemetry: openTelemetry(),
    });
    try {
      expect(passed.opts.telemetry).toBe(theirs);
      expect(ours.opts.telemetry).toBeUndefined();
      expect(passed.opts.autorun).toBe(false);
    } finally {
      await Promise.all([passed.close(), ours.close()]);
    }
  });

  it("runs a job whose trace metadata is not JSON in a span of a new trace, and fields that are not text are no context", async () => {
    const q = queue("bad-metadata");
    sdk.spans.reset();
    const worker = processEvents({
      queue: "bad-metadata",
      connection: connection(),
      telemetry: openTelemetry(),
      onEvent() {},
    });
    worker.on("error", () => {});
    try {
      const parent = trace.getTracer("test").startSpan("elsewhere");
      const carrier: Record<string, string> = {};
      propagation.inject(trace.setSpan(context.active(), parent), carrier);
      parent.end();
      await q.add("flag.updated", event("evt_not_json"), { jobId: "not-json", telemetry: { metadata: "{not json" } });
      await q.add("flag.updated", event("evt_numbers"), {
        jobId: "numbers",
        telemetry: { metadata: JSON.stringify({ traceparent: 42 }) },
      });
      await q.add("flag.updated", event("evt_linked"), {
        jobId: "linked",
        telemetry: { metadata: JSON.stringify({ ...carrier, extra: { nested: true } }) },
      });
      // A tracestate that is not text is dropped; the traceparent beside it still links the trace.
      await q.add("flag.updated", event("evt_state"), {
        jobId: "state",
        telemetry: { metadata: JSON.stringify({ ...carrier, tracestate: ["vendor=1"] }) },
      });
      // A job added without any telemetry option (by other code) runs in a new trace.
      await q.add("flag.updated", event("evt_plain"), { jobId: "plain" });
      const spans = await sdk.ended("flag-webhooks.process", 5);
      const byJob = new Map(spans.map((span) => [span.attributes["messaging.message.id"], span]));
      for (const id of ["not-json", "numbers"]) {
        expect(byJob.get(id)?.parentSpanContext).toBeUndefined();
        expect(byJob.get(id)?.spanContext().traceId).not.toBe(parent.spanContext().traceId);
      }
      expect(byJob.get("linked")?.spanContext().traceId).toBe(parent.spanContext().traceId);
      expect(byJob.get("linked")?.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
      expect(byJob.get("state")?.spanContext().traceId).toBe(parent.spanContext().traceId);
      expect(byJob.get("state")?.spanContext().traceState).toBeUndefined();
      expect(byJob.get("plain")?.parentSpanContext).toBeUndefined();
    } finally {
      await worker.close();
    }
  });
});
