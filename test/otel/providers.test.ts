import { SpanStatusCode } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { type OpenTelemetryOptions, openTelemetry } from "flag-webhooks/otel";
import { describe, expect, it } from "vitest";
import { signatureOf } from "../support/deliveries.js";

// openTelemetry() with providers passed as options and no global SDK registered (this file never
// registers one): what it does with no SDK, with only a tracer, with only a meter, and the
// instruments and spans it makes, read back from the SDK's in-memory exporters.
const SECRET = "otel-providers-secret";

async function delivery(body: string, signature?: string): Promise<Request> {
  return new Request("http://localhost/webhooks", {
    method: "POST",
    headers: { "service-signature": signature ?? (await signatureOf(SECRET, body)) },
    body,
  });
}

const event: WebhookEvent = {
  id: "evt_otel_mutation",
  type: "flag.created",
  createdAt: new Date().toISOString(),
  environment: "staging",
  data: { flag: "f" },
} as WebhookEvent;

function tracing(options: ConstructorParameters<typeof BasicTracerProvider>[0] = {}) {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ ...options, spanProcessors: [new SimpleSpanProcessor(spans)] });
  return { spans, tracerProvider };
}

function metering() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    async metrics() {
      await reader.forceFlush();
      return exporter.getMetrics().flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics));
    },
  };
}

async function handle(options: OpenTelemetryOptions, request: Request, onEvent: () => unknown = () => {}) {
  const handler = webhookHandler({ secret: SECRET, telemetry: openTelemetry(options), onEvent });
  return (await handler(request)).status;
}

describe("openTelemetry without a registered SDK", () => {
  it("does nothing with no providers given: no delivery is recorded", () => {
    expect(openTelemetry().delivery()).toBeUndefined();
  });

  it("records nothing when the given tracer samples nothing and no meter is given", () => {
    const { tracerProvider } = tracing({ sampler: new AlwaysOffSampler() });
    expect(openTelemetry({ tracerProvider }).delivery()).toBeUndefined();
  });

  it("traces each delivery with the tracer given, even with no meter", async () => {
    const { spans, tracerProvider } = tracing();
    const body = JSON.stringify(event);
    expect(await handle({ tracerProvider }, await delivery(body))).toBe(204);
    const [span] = spans.getFinishedSpans();
    expect([span?.name, span?.instrumentationScope.name]).toEqual(["flag-webhooks.receive", "flag-webhooks"]);
    expect(span?.attributes).toMatchObject({
      "flag_webhooks.event.id": "evt_otel_mutation",
      "flag_webhooks.event.type": "flag.created",
      "flag_webhooks.event.environment": "staging",
      "flag_webhooks.outcome": "handled",
      "http.response.status_code": 204,
    });
  });

  it("records the metrics with the meter given, even with no tracer, under their names, units and buckets", async () => {
    const { meterProvider, metrics } = metering();
    const body = JSON.stringify(event);
    expect(await handle({ meterProvider }, await delivery(body))).toBe(204);
    expect(await handle({ meterProvider }, await delivery(body, "0".repeat(64)))).toBe(401);
    const found = await metrics();
    const descriptors = Object.fromEntries(
      found.map((metric) => [metric.descriptor.name, [metric.descriptor.unit, metric.descriptor.description]]),
    );
    expect(descriptors).toEqual({
      "flag_webhooks.deliveries": [
        "{delivery}",
        "Deliveries received, by outcome (handled, duplicate, or the error code answered) and event type",
      ],
      "flag_webhooks.verifications": [
        "{delivery}",
        "Authentic deliveries, by the index of the secret that verified them (rotation progress)",
      ],
      "flag_webhooks.handler.duration": ["s", "How long the handler took, by event type and outcome"],
    });
    const deliveries = found.find((metric) => metric.descriptor.name === "flag_webhooks.deliveries");
    // A refused delivery has no type to count it by: its point carries the outcome alone.
    expect(deliveries?.dataPoints.map((point) => Object.keys(point.attributes).sort())).toEqual([
      ["flag_webhooks.event.type", "flag_webhooks.outcome"],
      ["flag_webhooks.outcome"],
    ]);
    const handler = found.find((metric) => metric.descriptor.name === "flag_webhooks.handler.duration");
    expect((handler?.dataPoints[0]?.value as Histogram | undefined)?.buckets.boundaries).toEqual([
      0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
    ]);
  });

  it("times the dedupe store in its own histogram, in seconds with the same buckets", async () => {
    const { meterProvider, metrics } = metering();
    const handler = webhookHandler({
      secret: SECRET,
      telemetry: openTelemetry({ meterProvider }),
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent() {},
    });
    expect((await handler(await delivery(JSON.stringify(event)))).status).toBe(204);
    const store = (await metrics()).find((metric) => metric.descriptor.name === "flag_webhooks.store.duration");
    expect([store?.descriptor.unit, store?.descriptor.description]).toEqual([
      "s",
      "How long the dedupe store took, by operation (claim, complete, release)",
    ]);
    expect((store?.dataPoints[0]?.value as Histogram | undefined)?.buckets.boundaries).toHaveLength(14);
  });
});

describe("openTelemetry().process, the worker's side", () => {
  it("records a failed attempt as handler_error with the thrown value, even one that is not an Error", async () => {
    const { spans, tracerProvider } = tracing();
    const telemetry = openTelemetry({ tracerProvider });
    await expect(
      telemetry.process(undefined, { event, id: undefined, attempt: 3 }, async () => {
        throw "a plain string";
      }),
    ).rejects.toBe("a plain string");
    const [span] = spans.getFinishedSpans();
    expect(span?.name).toBe("flag-webhooks.process");
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: "handler_error" });
    expect(span?.events.map((e) => [e.attributes?.["exception.type"], e.attributes?.["exception.message"]])).toEqual([
      ["string", "a plain string"],
    ]);
    // No job id given: no message id attribute at all.
    expect(Object.keys(span?.attributes ?? {}).sort()).toEqual([
      "flag_webhooks.event.environment",
      "flag_webhooks.event.id",
      "flag_webhooks.event.type",
      "flag_webhooks.job.attempt",
    ]);
    expect(span?.attributes["flag_webhooks.job.attempt"]).toBe(3);
  });

  it("returns what the handler returned, in a span that ends without an error", async () => {
    const { spans, tracerProvider } = tracing();
    const result = await openTelemetry({ tracerProvider }).process(
      undefined,
      { event, id: "7", attempt: 1 },
      async () => 42,
    );
    expect(result).toBe(42);
    const [span] = spans.getFinishedSpans();
    expect([span?.status.code, span?.attributes["messaging.message.id"]]).toEqual([SpanStatusCode.UNSET, "7"]);
  });
});
