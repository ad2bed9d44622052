import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SpanKind } from "@opentelemetry/api";
import { AggregationTemporality, InMemoryMetricExporter } from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../examples/otel/server.js";
import { startTelemetry } from "../../examples/otel/telemetry.js";
import { signatureOf } from "../support/deliveries.js";
import { close, listen } from "../support/http.js";

// examples/otel as its README section says to run it: the SDK started first, then the Express
// receiver with `telemetry: openTelemetry()`, sent a delivery that carries a W3C traceparent (as
// the emulator's deliveries do), exported to memory instead of the console.
const SECRET = "otel-example-secret";
const SENDER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SENDER_SPAN = "00f067aa0ba902b7";

describe("examples/otel", () => {
  const spans = new InMemorySpanExporter();
  const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  let telemetry: ReturnType<typeof startTelemetry>;
  let server: Server;
  beforeAll(async () => {
    telemetry = startTelemetry({ spans, metrics });
    server = await listen(createServer(createApp(SECRET)));
  });
  afterAll(async () => {
    await close(server);
    await telemetry.shutdown();
  });

  it("puts the sender, the HTTP request, the delivery and the handler's own span in one trace", async () => {
    const body = JSON.stringify({
      id: "evt_otel_example",
      type: "flag.updated",
      createdAt: new Date().toISOString(),
      environment: "production",
      data: { flag: "new-checkout", changes: [], actor: { type: "user", email: "dana@example.com" } },
    });
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
      method: "POST",
      headers: {
        "service-signature": await signatureOf(SECRET, body),
        traceparent: `00-${SENDER_TRACE}-${SENDER_SPAN}-01`,
      },
      body,
    });
    expect(response.status).toBe(204);
    await telemetry.flush();

    const finished = spans.getFinishedSpans();
    const http = finished.find((span) => span.kind === SpanKind.SERVER);
    const receive = finished.find((span) => span.name === "flag-webhooks.receive");
    const handler = finished.find((span) => span.name === "apply flag change");
    expect([http, receive, handler].map((span) => span?.spanContext().traceId)).toEqual([
      SENDER_TRACE,
      SENDER_TRACE,
      SENDER_TRACE,
    ]);
    expect(http?.parentSpanContext?.spanId).toBe(SENDER_SPAN);
    expect(receive?.parentSpanContext?.spanId).toBe(http?.spanContext().spanId);
    expect(handler?.parentSpanContext?.spanId).toBe(receive?.spanContext().spanId);
    expect(receive?.attributes).toMatchObject({ "flag_webhooks.outcome": "handled", "flag_webhooks.secret_index": 0 });
    expect(handler?.attributes).toEqual({ "app.flag": "new-checkout" });

    const names = metrics
      .getMetrics()
      .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics))
      .filter((metric) => metric.dataPoints.length > 0)
      .map((metric) => metric.descriptor.name);
    expect(names).toEqual(expect.arrayContaining(["flag_webhooks.deliveries", "flag_webhooks.handler.duration"]));
  });
});
