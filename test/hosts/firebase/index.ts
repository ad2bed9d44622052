import { onRequest } from "firebase-functions/https";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";

// Cloud Functions for Firebase hand onRequest the Functions Framework's request, its body parsed
// and its bytes on req.rawBody, where the middleware finds them.
const receive = webhookMiddleware({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

export const webhooks = onRequest((req, res) => receive(req, res, () => {}));
