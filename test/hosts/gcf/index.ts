import { http } from "@google-cloud/functions-framework";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";

// The Functions Framework parses the body first and keeps its bytes on req.rawBody, where the
// middleware finds them: nothing to turn off.
const webhooks = webhookMiddleware({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

http("webhooks", (req, res) => webhooks(req, res, () => {}));
