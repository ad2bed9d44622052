// Every delivery as a span and a few metrics: `WEBHOOK_SECRET=... npx tsx examples/otel/server.ts`,
// then send it deliveries (`npx flag-webhooks send` or `flag-webhooks dev`); spans and metrics
// print on the console. See examples/otel/telemetry.ts for the SDK set-up.
import { fileURLToPath } from "node:url";
import { trace } from "@opentelemetry/api";
import express from "express";
import { createRouter } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { openTelemetry } from "flag-webhooks/otel";
import { startTelemetry } from "./telemetry.js";

const tracer = trace.getTracer("example-app");

export function createApp(secret: string | string[]): express.Express {
  const router = createRouter().on("flag.updated", async (event) => {
    // The handler runs inside the delivery's span: this span is its child.
    await tracer.startActiveSpan("apply flag change", async (span) => {
      span.setAttribute("app.flag", event.data.flag);
      span.end();
    });
  });
  const app = express();
  app.post("/webhooks", webhookMiddleware({ secret, telemetry: openTelemetry(), onEvent: router }));
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  startTelemetry();
  const port = Number(process.env.PORT ?? 3000);
  createApp(process.env.WEBHOOK_SECRET ?? "").listen(port, "127.0.0.1");
  console.log(`listening on http://127.0.0.1:${port}/webhooks`);
}
