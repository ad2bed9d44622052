import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

// `next build` loads this module to collect its config, when WEBHOOK_SECRET may not be set yet:
// the handler is made on the first request instead, where the secret is.
let handler: ((request: Request) => Promise<Response>) | undefined;

export function POST(request: Request): Promise<Response> {
  handler ??= webhookHandler({
    secret: process.env.WEBHOOK_SECRET ?? "",
    dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
    onEvent(event) {
      if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
    },
  });
  return handler(request);
}
