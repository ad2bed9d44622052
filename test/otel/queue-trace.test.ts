import {
  type Context,
  context,
  createTraceState,
  propagation,
  ROOT_CONTEXT,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { openTelemetry } from "flag-webhooks/otel";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBullmqHandOff } from "../support/bullmq-hand-off.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// One trace across the BullMQ hand-off with a manual OpenTelemetry set-up: a tracer provider and
// the AsyncLocalStorage context manager, and no propagator registered (propagation.inject is then
// a no-op). The worker's span must still continue the delivery's trace. An app's own propagator,
// when it registers one, still decides. Real Redis, real BullMQ, the real SDK.
const availability = redisAvailability();
const SECRET = "queue-trace-secret";

/** A propagator of the app's own, in a format that is not W3C's: `x-trace: <trace id>.<span id>`. */
class OwnPropagator implements TextMapPropagator {
  inject(active: Context, carrier: unknown, setter: TextMapSetter): void {
    const span = trace.getSpanContext(active);
    if (span) setter.set(carrier, "x-trace", `${span.traceId}.${span.spanId}`);
  }
  extract(active: Context, carrier: unknown, getter: TextMapGetter): Context {
    const [traceId, spanId] = String(getter.get(carrier, "x-trace") ?? "").split(".");
    if (!traceId || !spanId) return active;
    return trace.setSpanContext(active, { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
  }
  fields(): string[] {
    return ["x-trace"];
  }
}

describe.skipIf(!availability.available)("one trace from the delivery to the worker, set up by hand", () => {
  let redis: RedisServer;
  const spans = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });

  beforeAll(async () => {
    redis = await startRedis();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.disable(); // none registered, whatever ran before in this process
  });
  afterAll(async () => {
    await stopRedis(redis);
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
  });

  /**
   * Delivers one event through a receiver and enqueueTo with `telemetry`, runs it in a worker
   * with the same, and returns the receive span, the worker's process span and the job's metadata.
   */
  async function handOff(telemetry: ReturnType<typeof openTelemetry>, within = context.active()) {
    spans.reset();
    const queue = startBullmqHandOff(redis.port, SECRET, { telemetry });
    try {
      const event = createEvent("flag.updated");
      const answer = await context.with(within, () => queue.deliver(event, { telemetry }, telemetry));
      expect(answer.status).toBe(202);
      await expect.poll(() => queue.handled.some((e) => e.id === event.id), { timeout: 10_000 }).toBe(true);
      await expect
        .poll(() => spans.getFinishedSpans().some((s) => s.name === "flag-webhooks.process"), { timeout: 5_000 })
        .toBe(true);
      const job = await queue.queue.getJob(`event-${event.id}`);
      const find = (name: string) => spans.getFinishedSpans().find((s) => s.name === name);
      return {
        receive: find("flag-webhooks.receive"),
        process: find("flag-webhooks.process"),
        carried: JSON.parse(job?.opts.telemetry?.metadata ?? "{}") as Record<string, string>,
      };
    } finally {
      await queue.close();
    }
  }

  it("with the provider given to openTelemetry, no global one and no propagator: the worker's span is a child of the receive span", async () => {
    const { receive, process, carried } = await handOff(openTelemetry({ tracerProvider: provider }));
    const parent = receive?.spanContext();
    expect(parent?.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(carried).toEqual({ traceparent: `00-${parent?.traceId}-${parent?.spanId}-01` });
    expect(process?.spanContext().traceId).toBe(parent?.traceId);
    expect(process?.parentSpanContext?.spanId).toBe(parent?.spanId);
  });

  it("with the provider registered globally and no propagator: the same, and the caller's tracestate goes along", async () => {
    trace.setGlobalTracerProvider(provider);
    // The delivery arrives in a remote parent's context, as HTTP server instrumentation makes one.
    const caller = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
      traceState: createTraceState("vendor=opaque"),
    });
    const { receive, process, carried } = await handOff(openTelemetry(), caller);
    const parent = receive?.spanContext();
    expect(parent?.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(carried).toEqual({
      traceparent: `00-${parent?.traceId}-${parent?.spanId}-01`,
      tracestate: "vendor=opaque",
    });
    expect(process?.spanContext().traceId).toBe(parent?.traceId);
    expect(process?.parentSpanContext?.spanId).toBe(parent?.spanId);
  });

  it("reads a job's traceparent as W3C Trace Context does: a valid one is continued, with its tracestate and sampling", async () => {
    trace.setGlobalTracerProvider(provider);
    spans.reset();
    const telemetry = openTelemetry();
    const queue = startBullmqHandOff(redis.port, SECRET, { telemetry });
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const spanId = "00f067aa0ba902b7";
    // What another producer's job may carry, and whether the worker's span continues it.
    const carried: [string, Record<string, string | number>, boolean][] = [
      ["valid", { traceparent: `00-${traceId}-${spanId}-01`, tracestate: "vendor=opaque" }, true],
      ["later-version", { traceparent: `cc-${traceId}-${spanId}-01-what-comes-later` }, true],
      ["version-ff", { traceparent: `ff-${traceId}-${spanId}-01` }, false],
      ["version-00-longer", { traceparent: `00-${traceId}-${spanId}-01-more` }, false],
      ["zero-trace", { traceparent: `00-${"0".repeat(32)}-${spanId}-01` }, false],
      ["zero-span", { traceparent: `00-${traceId}-${"0".repeat(16)}-01` }, false],
      ["upper-case", { traceparent: `00-${traceId.toUpperCase()}-${spanId}-01` }, false],
      ["short", { traceparent: `00-${traceId}-${spanId.slice(1)}-01` }, false],
      ["not-text", { traceparent: 7 }, false],
      ["not-sampled", { traceparent: `00-${traceId}-${spanId}-00` }, true],
    ];
    try {
      for (const [jobId, fields] of carried) {
        const event = createEvent("flag.updated", { id: `evt_${jobId}` });
        await queue.queue.add("flag.updated", event, { jobId, telemetry: { metadata: JSON.stringify(fields) } });
      }
      await expect.poll(() => queue.handled.length, { timeout: 10_000 }).toBe(carried.length);
      const ended = spans.getFinishedSpans().filter((span) => span.name === "flag-webhooks.process");
      const byJob = new Map(ended.map((span) => [span.attributes["messaging.message.id"], span]));
      // Sampling is carried: the child of a parent that was not sampled is not recorded either.
      expect(byJob.has("not-sampled")).toBe(false);
      expect(ended).toHaveLength(carried.length - 1);
      for (const [jobId, , continued] of carried.filter(([id]) => id !== "not-sampled")) {
        const span = byJob.get(jobId);
        const parent = continued ? { traceId, spanId } : undefined;
        expect([jobId, span?.parentSpanContext && { ...span.parentSpanContext }]).toEqual([
          jobId,
          parent && {
            ...parent,
            traceFlags: TraceFlags.SAMPLED,
            isRemote: true,
            ...(jobId === "valid" ? { traceState: expect.anything() } : {}),
          },
        ]);
        expect(span?.spanContext().traceId === traceId).toBe(continued);
      }
      expect(byJob.get("valid")?.spanContext().traceState?.get("vendor")).toBe("opaque");
    } finally {
      await queue.close();
    }
  });

  it("with an app's own propagator registered: its fields are carried, and it continues the trace", async () => {
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(new OwnPropagator());
    try {
      const { receive, process, carried } = await handOff(openTelemetry());
      const parent = receive?.spanContext();
      expect(carried["x-trace"]).toBe(`${parent?.traceId}.${parent?.spanId}`);
      expect(process?.spanContext().traceId).toBe(parent?.traceId);
      expect(process?.parentSpanContext?.spanId).toBe(parent?.spanId);
    } finally {
      propagation.disable();
    }
  });
});
