// The body a delivery's signature was verified over, kept with the event it became, so that a
// store which keeps the event to run it later (the keep-then-work inboxes) stores exactly the
// bytes that were verified, and a replay re-parses them, never a re-serialised object.
import type { WebhookEvent } from "./events.js";

// Shared by every copy of this module (the ES module and CommonJS builds), as a symbol key: not
// enumerable, so JSON.stringify, Object.keys and a spread of the event never see it.
const RAW = Symbol.for("flag-webhooks.raw-body");

/** Keeps `bytes`, the verified body, with `event`. Internal; called by the receiver once verified. */
export function keepRawBody(event: WebhookEvent, bytes: Uint8Array): void {
  Object.defineProperty(event, RAW, { value: bytes, configurable: true });
}

/** The verified body `event` was parsed from, when a receiver made it; else undefined. */
export function rawBodyOf(event: WebhookEvent): Uint8Array | undefined {
  const bytes = (event as { [RAW]?: unknown })[RAW];
  return bytes instanceof Uint8Array ? bytes : undefined;
}
