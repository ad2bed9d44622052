import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { defineEventHandler, toWebRequest } from "h3";

const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

// h3 v1 (Nitro 2, Nuxt): toWebRequest() wraps the unread Node request in a web Request.
export default defineEventHandler((event) => webhooks(toWebRequest(event)));
