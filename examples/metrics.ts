// Metrics from the hooks: `WEBHOOK_SECRET=new WEBHOOK_SECRET_OLD=old npx tsx examples/metrics.ts`,
// then scrape http://127.0.0.1:3000/metrics. Counts every delivery by outcome, refusals by code,
// and which secret of a rotation signed it: when `secret_index="1"` stops growing, drop the old one.
import { fileURLToPath } from "node:url";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { Counter, Registry } from "prom-client";

export function createApp(secrets: string[]): { app: express.Express; registry: Registry } {
  const registry = new Registry();
  const verified = new Counter({
    name: "flag_webhooks_verified_total",
    help: "Authentic deliveries, by event type and by the index of the secret that signed them",
    labelNames: ["type", "secret_index"],
    registers: [registry],
  });
  const rejected = new Counter({
    name: "flag_webhooks_rejected_total",
    help: "Refused deliveries, by error code and HTTP status",
    labelNames: ["code", "status"],
    registers: [registry],
  });

  const app = express();
  app.post(
    "/webhooks",
    webhookMiddleware({
      secret: secrets,
      maxAge: "5m",
      // The hooks never see a secret or a signature: only the event, the index, the error.
      onVerified: (event, { secretIndex }) => verified.inc({ type: event.type, secret_index: secretIndex }),
      onRejected: (error) => rejected.inc({ code: error.code, status: error.status }),
      onEvent: () => {},
    }),
  );
  app.get("/metrics", async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics());
  });
  return { app, registry };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secrets = [process.env.WEBHOOK_SECRET, process.env.WEBHOOK_SECRET_OLD].filter((s): s is string => !!s);
  const port = Number(process.env.PORT ?? 3000);
  createApp(secrets).app.listen(port, "127.0.0.1", () => {
    console.log(`webhooks on http://127.0.0.1:${port}/webhooks, metrics on /metrics`);
  });
}
