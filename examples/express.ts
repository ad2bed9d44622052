// Express: `WEBHOOK_SECRET=... npx tsx examples/express.ts`, then POST deliveries to /webhooks.
import { fileURLToPath } from "node:url";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { describeEvent } from "./handle-events.js";

export function createApp(secret: string | string[]): express.Express {
  const app = express();
  // Mount the webhook route before any app-wide express.json(): the signature covers raw bytes.
  app.post("/webhooks", webhookMiddleware({ secret }), (req, res) => {
    const event = req.webhookEvent;
    if (!event) throw new Error("unreachable: the middleware sets webhookEvent before next()");
    res.json({ received: event.id, summary: describeEvent(event) });
  });
  app.use(express.json());
  // ...the rest of your app
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT ?? 3000);
  createApp(process.env.WEBHOOK_SECRET ?? "").listen(port, "127.0.0.1", () => {
    console.log(`listening on http://127.0.0.1:${port}/webhooks`);
  });
}
