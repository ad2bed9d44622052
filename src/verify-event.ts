import { checkAge } from "./delivery/replay-window.js";
import { WebhookError } from "./errors.js";
import { parseEvent, type WebhookEvent } from "./events.js";
import { assertPayload, type Payload } from "./payload.js";
import { assertSecret, matchingSecret, type Secret, SIGNATURE_HEADER, type VerifyOptions } from "./signature.js";
import { parseDuration } from "./util/duration.js";

/** Options of {@link verifyEvent}: those of `verifySignature`, plus the replay window. */
export interface VerifyEventOptions extends VerifyOptions {
  /**
   * The replay window: refuse an event whose `createdAt` is older than this (milliseconds, or a
   * duration such as `"5m"`), or more than a minute in the future, with `event_expired` (401).
   * Off by default.
   */
  maxAge?: number | string;
  /** The clock, in ms since the epoch, for the replay window; for tests. Default `Date.now`. */
  now?: () => number;
}

/**
 * Verifies a delivery, then parses it: the one call most receivers need. The body is never
 * parsed unless its signature is right, so a forged body that is not JSON is
 * `invalid_signature`, not `invalid_payload`.
 *
 * Throws {@link WebhookError}: `missing_signature` (401) when the header is absent or empty,
 * `invalid_signature` (401) when it does not equal the HMAC under any secret (a repeated header
 * included), `invalid_payload` (400) when an authentic body is not a valid event, and with
 * `maxAge`, `event_expired` (401) when it is outside the replay window.
 *
 * @example
 * ```ts
 * const event = await verifyEvent({
 *   secret: [newSecret, oldSecret],
 *   payload: await request.text(),
 *   signature: request.headers.get(SIGNATURE_HEADER),
 *   maxAge: "5m",
 * });
 * if (event.type === "flag.updated") console.log(event.data.flag);
 * ```
 */
export async function verifyEvent(options: VerifyEventOptions): Promise<WebhookEvent> {
  const { secret, payload, signature, maxAge, now = Date.now } = options;
  assertSecret(secret);
  assertPayload(payload);
  const window = maxAge === undefined ? undefined : parseDuration(maxAge, "maxAge");
  const { event } = await verifiedEvent(secret, payload, signature);
  if (window !== undefined) checkAge(event.createdAt, window, now());
  return event;
}

/**
 * verifyEvent's signature and parse steps for callers that validated `secret` and `payload`
 * already (the receiver), with the index of the secret that matched. Synchronous where the HMAC
 * is (node:crypto): a promise only with Web Crypto. Throws (or rejects with) the WebhookError.
 */
export function verifiedEvent(
  secret: Secret,
  payload: Payload,
  signature: VerifyOptions["signature"],
): Verified | Promise<Verified> {
  if (isMissing(signature)) throw missingSignature();
  const secretIndex = matchingSecret(secret, payload, signature);
  return typeof secretIndex === "number"
    ? parsedIfSigned(payload, secretIndex)
    : secretIndex.then((index) => parsedIfSigned(payload, index));
}

/** An authentic event, and the index of the secret that signed it. */
export interface Verified {
  event: WebhookEvent;
  secretIndex: number;
}

function parsedIfSigned(payload: Payload, secretIndex: number): Verified {
  if (secretIndex < 0) {
    throw new WebhookError("invalid_signature", `${SIGNATURE_HEADER} header is not the HMAC-SHA256 of the body`);
  }
  return { event: parseEvent(payload), secretIndex };
}

export function isMissing(signature: VerifyOptions["signature"]): boolean {
  // An empty string and an empty list both have length 0.
  return signature == null || signature.length === 0;
}

export function missingSignature(): WebhookError {
  return new WebhookError("missing_signature", `missing ${SIGNATURE_HEADER} header`);
}
