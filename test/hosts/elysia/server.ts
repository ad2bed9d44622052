import { Elysia } from "elysia";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

// parse: "none" keeps Elysia from reading the body: the handler gets the request unread.
new Elysia()
  .post("/webhooks", ({ request }) => webhooks(request), { parse: "none" })
  .listen({ port: Number(process.env.PORT ?? 3000), hostname: process.env.HOST });
