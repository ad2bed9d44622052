// Koa: `WEBHOOK_SECRET=... npx tsx examples/koa.ts`, then POST deliveries to any path.
import { fileURLToPath } from "node:url";
import { type WebhookState, webhookMiddleware } from "flag-webhooks/koa";
import Koa from "koa";
import { describeEvent } from "./handle-events.js";

export function createApp(secret: string | string[]): Koa<WebhookState> {
  const app = new Koa<WebhookState>();
  app.use(webhookMiddleware({ secret }));
  app.use((ctx) => {
    const event = ctx.state.webhookEvent;
    ctx.body = { received: event.id, summary: describeEvent(event) };
  });
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT ?? 3000);
  createApp(process.env.WEBHOOK_SECRET ?? "").listen(port, "127.0.0.1");
  console.log(`listening on http://127.0.0.1:${port}/`);
}
