import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { H3, serve } from "h3";

const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

// h3 v2: event.req is the web Request, unread.
const app = new H3().post("/webhooks", (event) => webhooks(event.req));

serve(app, { port: Number(process.env.PORT ?? 3000), hostname: process.env.HOST });
