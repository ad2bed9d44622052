import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { Queue, type Worker } from "bullmq";
import type { WebhookEvent } from "flag-webhooks";
import { enqueueTo, processEvents } from "flag-webhooks/bullmq";
import { webhookHandler } from "flag-webhooks/fetch";
import { openTelemetry } from "flag-webhooks/otel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureOf } from "../support/deliveries.js";
import { close, listen } from "../support/http.js";
import { type Sdk, startSdk } from "../support/otel.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// Telemetry across the queue: one delivery over HTTP, enqueued with enqueueTo and run by
// processEvents on a real redis-server, is one trace: the HTTP server span, the receive span, and
// the worker's process span for each attempt (the first fails, the retry succeeds).
const availability = redisAvailability();
const SECRET = "otel-bullmq-secret";

describe.skipIf(!availability.available)("one trace from the delivery to the worker (real Redis, real BullMQ)", () => {
  let sdk: Sdk;
  let redis: RedisServer;
  let queue: Queue;
  let worker: Worker<WebhookEvent>;
  let server: Server;
  const handled: { event: WebhookEvent; data: unknown; attempt: number }[] = [];

  beforeAll(async () => {
    sdk = startSdk();
    redis = await startRedis();
    const connection = { host: "127.0.0.1", port: redis.port };
    const telemetry = openTelemetry();
    queue = new Queue("otel-events", { connection });
    server = await listen(
      createAdaptorServer({
        fetch: webhookHandler({
          secret: SECRET,
          telemetry,
          onEvent: enqueueTo(queue, { telemetry, job: { attempts: 2, backoff: { type: "fixed", delay: 20 } } }),
        }),
      }) as Server,
    );
    worker = processEvents({
      queue: "otel-events",
      connection,
      telemetry,
      async onEvent(event, job) {
        handled.push({ event, data: job.data, attempt: job.attemptsMade + 1 });
        await trace.getTracer("app").startActiveSpan("app.worker", async (span) => span.end());
        if (job.attemptsMade === 0) throw new Error("first attempt fails on purpose");
      },
    });
  });
  afterAll(async () => {
    await worker?.close();
    await queue?.close();
    await close(server);
    await stopRedis(redis);
    await sdk?.shutdown();
  });

  it("links the HTTP request, the receive span and every attempt of the worker, and leaves job.data the event", async () => {
    const body = JSON.stringify({
      id: "evt_otel_queue_1",
      type: "flag.updated",
      createdAt: new Date().toISOString(),
      environment: "production",
      data: { flag: "checkout", changes: [], actor: { type: "user", email: "a@example.com" } },
    });
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
      method: "POST",
      headers: { "service-signature": await signatureOf(SECRET, body) },
      body,
    });
    expect(response.status).toBe(202);

    const attempts = await sdk.ended("flag-webhooks.process", 2);
    const [receive] = await sdk.ended("flag-webhooks.receive");
    const [http] = await sdk.ended((span) => span.kind === SpanKind.SERVER);
    const traceId = http?.spanContext().traceId;
    expect(receive?.spanContext().traceId).toBe(traceId);
    expect(receive?.parentSpanContext?.spanId).toBe(http?.spanContext().spanId);
    expect(receive?.attributes["flag_webhooks.outcome"]).toBe("handled");
    expect(receive?.attributes["http.response.status_code"]).toBe(202);

    const sorted = [...attempts].sort(
      (a, b) => Number(a.attributes["flag_webhooks.job.attempt"]) - Number(b.attributes["flag_webhooks.job.attempt"]),
    );
    expect(sorted.map((span) => span.attributes)).toEqual(
      [1, 2].map((attempt) => ({
        "flag_webhooks.event.id": "evt_otel_queue_1",
        "flag_webhooks.event.type": "flag.updated",
        "flag_webhooks.event.environment": "production",
        "flag_webhooks.job.attempt": attempt,
        "messaging.message.id": "event-evt_otel_queue_1",
      })),
    );
    for (const span of sorted) {
      expect(span.kind).toBe(SpanKind.CONSUMER);
      expect(span.spanContext().traceId).toBe(traceId);
      expect(span.parentSpanContext?.spanId).toBe(receive?.spanContext().spanId);
    }
    expect(sorted.map((span) => span.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.UNSET]);
    expect(sorted[0]?.events.map((event) => event.attributes?.["exception.message"])).toEqual([
      "first attempt fails on purpose",
    ]);
    // The worker's own spans nest under the attempt that ran them.
    const own = await sdk.ended("app.worker", 2);
    expect(own.map((span) => span.parentSpanContext?.spanId).sort()).toEqual(
      sorted.map((span) => span.spanContext().spanId).sort(),
    );
    // The job's data is the event, nothing added.
    expect(handled.map((run) => run.attempt)).toEqual([1, 2]);
    for (const run of handled) expect(run.data).toEqual(JSON.parse(body));
  });
});
