import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

Bun.serve({
  port: Number(process.env.PORT ?? 3000),
  hostname: process.env.HOST,
  routes: { "/webhooks": { POST: webhooks } },
});
