// Misuses that must not compile, checked with the other consumer files under every compiler and
// resolution: were the package's types missing or `any`, each @ts-expect-error below would be
// unused, which is itself an error, so the check cannot pass by seeing no types at all.
import { parseEvent, sign, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";

// @ts-expect-error "flag.update" is not an event type.
export const misspelt: WebhookEvent["type"] = "flag.update";
// @ts-expect-error The payload is the raw body, never a parsed object.
export const parsed = sign({ secret: "s", payload: { id: "evt_1" } });
export function flagOf(payload: string): string {
  const event = parseEvent(payload);
  // @ts-expect-error data.flag exists only once the type is narrowed to flag.updated.
  return event.data.flag;
}
// @ts-expect-error secret is required.
export const noSecret = webhookMiddleware({});
