// Switching on event.type: each case is narrowed, so event.data is typed with no casts.
import type { WebhookEvent } from "flag-webhooks";

export function describeEvent(event: WebhookEvent): string {
  switch (event.type) {
    case "flag.updated": {
      const changes = event.data.changes.map((c) => `${c.path}: ${JSON.stringify(c.from)} → ${JSON.stringify(c.to)}`);
      return `${event.data.actor.email} changed ${event.data.flag} in ${event.environment} (${changes.join(", ")})`;
    }
    case "flag.created":
    case "flag.deleted":
      // The service does not document these payloads: check a field before trusting it.
      return `${event.type} ${typeof event.data.flag === "string" ? event.data.flag : "(unnamed flag)"}`;
    case "rollout.step":
    case "rollout.guard_triggered":
      return `${event.type} in ${event.environment}`;
    case "unknown":
      // A type newer than this library: authentic, delivered, and yours to log or ignore.
      return `unhandled event type ${event.originalType}`;
  }
}
