// Draws docs/otel-trace.svg, the picture of one trace in docs/observability.md, from spans the OpenTelemetry SDK
// really exported: `npx tsx scripts/trace-svg.ts` (needs redis-server). A sender posts a signed
// delivery with a W3C traceparent (as the emulator does), an Express receiver with
// `telemetry: openTelemetry()` hands it to BullMQ with enqueueTo, and processEvents runs it in a
// worker whose first attempt throws, so BullMQ retries. Every span of that trace is drawn as a
// waterfall: one row per span, indented under its parent, placed and sized by its own times.
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { hrTimeToMicroseconds } from "@opentelemetry/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { Queue } from "bullmq";
import express from "express";
import { enqueueTo, processEvents } from "flag-webhooks/bullmq";
import { webhookMiddleware } from "../src/adapters/express.js";
import { openTelemetry } from "../src/otel/index.js";
import { startSdk } from "../test/support/otel.js";
import { startRedis, stopRedis } from "../test/support/redis-server.js";

const SECRET = "trace-svg-secret";
const out = resolve(import.meta.dirname, "../docs/otel-trace.svg");

const sdk = startSdk();
const redis = await startRedis();
const connection = { host: "127.0.0.1", port: redis.port };
const telemetry = openTelemetry();
const queue = new Queue("trace-svg", { connection });
const app = express();
app.post(
  "/webhooks",
  webhookMiddleware({
    secret: SECRET,
    telemetry,
    onEvent: enqueueTo(queue, { telemetry, job: { attempts: 2, backoff: { type: "fixed", delay: 40 } } }),
  }),
);
const server = createServer(app).listen(0, "127.0.0.1");
await new Promise((done) => server.once("listening", done));
const worker = processEvents({
  queue: "trace-svg",
  connection,
  telemetry,
  async onEvent(event, job) {
    await trace.getTracer("worker").startActiveSpan("apply flag change", async (span) => {
      span.setAttribute("app.flag", String((event.data as { flag?: unknown }).flag));
      await new Promise((done) => setTimeout(done, 3));
      span.end();
    });
    if (job.attemptsMade === 0) throw new Error("the flag store was busy");
  },
});

// The sender: one client span per delivery, its context sent as a traceparent header.
const body = JSON.stringify({
  id: "evt_01HZX3K9",
  type: "flag.updated",
  createdAt: new Date().toISOString(),
  environment: "production",
  data: {
    flag: "new-checkout",
    changes: [{ path: "on", from: false, to: true }],
    actor: { type: "user", email: "dana@example.com" },
  },
});
const { port } = server.address() as AddressInfo;
await trace.getTracer("emulator").startActiveSpan("deliver flag.updated", { kind: SpanKind.CLIENT }, async (span) => {
  const headers: Record<string, string> = {
    "service-signature": createHmac("sha256", SECRET).update(body).digest("hex"),
  };
  propagation.inject(context.active(), headers);
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: "POST", headers, body });
  span.setAttribute("http.response.status_code", response.status);
  span.end();
});
await sdk.ended("flag-webhooks.process", 2);
await sdk.ended("apply flag change", 2);

await worker.close();
await queue.close();
server.close();
await stopRedis(redis);
const spans = sdk.spans.getFinishedSpans();
await sdk.shutdown();
writeFileSync(out, render(spans));
console.log(`wrote ${out}: ${spans.length} spans`);

/** One row per span, depth-first from the root, each child after its parent in start order. */
function render(all: ReadableSpan[]): string {
  const root = all.find((span) => span.parentSpanContext === undefined);
  if (!root) throw new Error("no root span");
  const rows: { span: ReadableSpan; depth: number }[] = [];
  const visit = (span: ReadableSpan, depth: number) => {
    rows.push({ span, depth });
    all
      .filter((child) => child.parentSpanContext?.spanId === span.spanContext().spanId)
      .sort((a, b) => hrTimeToMicroseconds(a.startTime) - hrTimeToMicroseconds(b.startTime))
      .forEach((child) => {
        visit(child, depth + 1);
      });
  };
  visit(root, 0);
  const t0 = Math.min(...rows.map((row) => hrTimeToMicroseconds(row.span.startTime)));
  const t1 = Math.max(...rows.map((row) => hrTimeToMicroseconds(row.span.endTime)));
  const [width, label, rowHeight, top] = [980, 360, 44, 56];
  const scale = (width - label - 80) / (t1 - t0);
  const where = (span: ReadableSpan) => {
    const name = span.instrumentationScope.name;
    return name === "emulator"
      ? "sender"
      : name === "worker" || span.name === "flag-webhooks.process"
        ? "worker"
        : "receiver";
  };
  const colour = { sender: "#6b7fd7", receiver: "#2f9e77", worker: "#d08b2c" } as const;
  const xml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const parts = rows.map(({ span, depth }, i) => {
    const y = top + i * rowHeight;
    const start = hrTimeToMicroseconds(span.startTime) - t0;
    const duration = hrTimeToMicroseconds(span.endTime) - hrTimeToMicroseconds(span.startTime);
    const x = label + start * scale;
    const failed = span.status.code === SpanStatusCode.ERROR;
    const a = span.attributes;
    const detail = [
      a["flag_webhooks.outcome"] && `outcome ${a["flag_webhooks.outcome"]}`,
      a["flag_webhooks.job.attempt"] && `attempt ${a["flag_webhooks.job.attempt"]}`,
      a["http.response.status_code"] && `status ${a["http.response.status_code"]}`,
      failed && (span.events[0]?.attributes?.["exception.message"] ?? "error"),
    ]
      .filter(Boolean)
      .join(" · ");
    return [
      `<text x="${12 + depth * 16}" y="${y + 15}" class="name">${xml(span.name)}</text>`,
      `<text x="${12 + depth * 16}" y="${y + 31}" class="where">${where(span)}${detail ? ` · ${xml(String(detail))}` : ""}</text>`,
      `<rect x="${x.toFixed(1)}" y="${y + 4}" width="${Math.max(2, duration * scale).toFixed(1)}" height="16" rx="3" fill="${colour[where(span)]}"${failed ? ' stroke="#d1242f" stroke-width="2"' : ""}/>`,
      `<text x="${(x + Math.max(2, duration * scale) + 6).toFixed(1)}" y="${y + 17}" class="ms">${(duration / 1000).toFixed(1)} ms</text>`,
    ].join("\n  ");
  });
  const height = top + rows.length * rowHeight + 16;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="ui-sans-serif, system-ui, sans-serif">
  <title>One trace from the sender to the worker: ${rows.map((row) => xml(row.span.name)).join(", ")}</title>
  <style>.name{font-size:13px;fill:#1f2328}.where{font-size:11px;fill:#59636e}.ms{font-size:11px;fill:#59636e}.title{font-size:14px;font-weight:600;fill:#1f2328}</style>
  <rect width="100%" height="100%" fill="#ffffff"/>
  <text x="12" y="24" class="title">One trace ${root.spanContext().traceId.slice(0, 8)}…: ${rows.length} spans over ${((t1 - t0) / 1000).toFixed(1)} ms</text>
  <text x="12" y="42" class="where">sender (the emulator) → receiver (the HTTP server span, flag-webhooks.receive, which enqueues the job) → worker (flag-webhooks.process, one per attempt)</text>
  ${parts.join("\n  ")}
</svg>
`;
}
