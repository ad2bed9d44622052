// The checks of a request, in the order the receiver makes them: what can be refused before a byte
// of the body is read, then the body itself. Each throws the WebhookError it is answered with.
import { checkAge } from "../delivery/replay-window.js";
import { payloadTooLarge, WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { Payload } from "../payload.js";
import { attachRawBody } from "../raw-body.js";
import type { Secret } from "../signature.js";
import { isThenable } from "../util/thenable.js";
import { isMissing, missingSignature, type Verified, verifiedEvent } from "../verify-event.js";
import type { Delivery } from "./protocol.js";

const utf8 = new TextEncoder();

/** Before the body: the method (405), and a signature at all (401, so an unsigned body is never read). */
export function checkRequest(delivery: Delivery): void {
  if (delivery.method !== "POST") {
    throw new WebhookError(
      "method_not_allowed",
      delivery.notHttp ?? `method ${delivery.method} not allowed: deliveries are POST`,
    );
  }
  if (isMissing(delivery.signature)) throw missingSignature();
}

/** What the body checks need of the receiver's settings. */
export interface BodyChecks {
  secret: Secret;
  limit: number;
  maxAge: number | undefined;
  now: () => number;
  /** The receiver's `onEvent`: one that wants the verified body gets it with the event. */
  onEvent?: unknown;
}

/**
 * The body: its size (413), the signature over its bytes (401, always first: a stale *and*
 * forged delivery is invalid_signature), the event (400), then the replay window (401).
 * `authentic` is told of an authentic delivery before its age is checked. Synchronous unless the
 * HMAC is (Web Crypto).
 */
export function checkBody(
  body: Payload,
  signature: Delivery["signature"],
  checks: BodyChecks,
  authentic: (verified: Verified) => void,
): WebhookEvent | Promise<WebhookEvent> {
  // A string body (left by a body parser as rawBody) is measured, and verified, as UTF-8 bytes.
  const payload = typeof body === "string" ? utf8.encode(body) : body;
  if (payload.byteLength > checks.limit) throw payloadTooLarge(checks.limit);
  const result = verifiedEvent(checks.secret, payload, signature);
  return isThenable(result)
    ? result.then((value) => fresh(value, payload, checks, authentic))
    : fresh(result, payload, checks, authentic);
}

function fresh(
  verified: Verified,
  payload: Exclude<Payload, string>,
  checks: BodyChecks,
  authentic: (verified: Verified) => void,
): WebhookEvent {
  // The exact bytes verified stay with the event for an inbox that keeps it (stores those, not a re-serialisation).
  attachRawBody(verified.event, payload, checks.onEvent);
  authentic(verified);
  if (checks.maxAge !== undefined) checkAge(verified.event.createdAt, checks.maxAge, clock(checks.now));
  return verified.event;
}

/** Reads the clock, failing closed: a clock that names no instant must not turn the window off. */
function clock(now: () => number): number {
  const value = now();
  // Stryker disable next-line ConditionalExpression: equivalent: Number.isFinite is false for anything but a number.
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new TypeError(
      `flag-webhooks: option "now" must return a finite number of ms since the epoch, got ${typeof value === "number" ? value : typeof value}`,
    );
  }
  return value;
}
