// The body a delivery's signature was verified over, kept with the event it became, so that a
// store which keeps the event to run it later (the keep-then-work inboxes) stores exactly the
// bytes that were verified, and a replay re-parses them, never a re-serialised object. Only for
// an `onEvent` marked as wanting it: every other receiver pays nothing for it.
import type { WebhookEvent } from "./events.js";
import { bytesOf, type Payload } from "./payload.js";

// Shared by every copy of this module (the ES module and CommonJS builds), as symbol keys.
const RAW = Symbol.for("flag-webhooks.raw-body");
const WANTS = Symbol.for("flag-webhooks.wants-raw-body");

/** Marks an `onEvent` (a store's `enqueue()`) as wanting the verified body of each event it gets. */
export function wantsRawBody<Handler extends (...args: never[]) => unknown>(handler: Handler): Handler {
  Object.defineProperty(handler, WANTS, { value: true });
  return handler;
}

/**
 * Keeps `payload`, the verified body, with `event` when `onEvent` wants it; the byte view is made
 * only then, so no other receiver pays for it. Not enumerable, so JSON.stringify, Object.keys, a
 * spread and a deep equality of the event never see it.
 */
export function attachRawBody(event: WebhookEvent, payload: Exclude<Payload, string>, onEvent: unknown): void {
  if ((onEvent as { [WANTS]?: unknown } | undefined)?.[WANTS] !== true) return;
  Object.defineProperty(event, RAW, { value: bytesOf(payload), configurable: true });
}

/** The verified body `event` was parsed from, when a receiver kept it; else undefined. */
export function rawBodyOf(event: WebhookEvent): Uint8Array | undefined {
  const bytes = (event as { [RAW]?: unknown })[RAW];
  return bytes instanceof Uint8Array ? bytes : undefined;
}
