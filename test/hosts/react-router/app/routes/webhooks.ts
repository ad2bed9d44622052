import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import type { ActionFunctionArgs } from "react-router";

const webhooks = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
  onEvent(event) {
    if (event.type === "flag.updated") console.log("flag updated:", event.id, event.data.flag);
  },
});

// A resource route: an action and no component, so the Response goes out as it is.
export function action({ request }: ActionFunctionArgs): Promise<Response> {
  return webhooks(request);
}
