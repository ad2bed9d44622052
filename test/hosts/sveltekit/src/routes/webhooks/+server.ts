import type { RequestHandler } from "@sveltejs/kit";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

// `vite build` loads this module to analyse the routes, when WEBHOOK_SECRET may not be set yet:
// the handler is made on the first request instead, where the secret is.
let webhooks: ((request: Request) => Promise<Response>) | undefined;

export const POST: RequestHandler = ({ request }) => {
  webhooks ??= webhookHandler({
    secret: process.env.WEBHOOK_SECRET ?? "",
    dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
    onEvent(event) {
      if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
    },
  });
  return webhooks(request);
};
