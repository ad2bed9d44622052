import { WebhookError } from "./errors.js";
import { parseEvent, type WebhookEvent } from "./events.js";
import { assertPayload, type Payload } from "./payload.js";
import { assertSecret, matches, type Secret, SIGNATURE_HEADER, type VerifyOptions } from "./signature.js";

/**
 * Verifies a delivery, then parses it: the one call most receivers need. The body is never
 * parsed unless its signature is right, so a forged body that is not JSON is
 * `invalid_signature`, not `invalid_payload`.
 *
 * Throws {@link WebhookError}: `missing_signature` (401) when the header is absent or empty,
 * `invalid_signature` (401) when it does not equal the HMAC under any secret (a repeated header
 * included), `invalid_payload` (400) when an authentic body is not a valid event.
 *
 * @example
 * ```ts
 * const event = await verifyEvent({
 *   secret: [newSecret, oldSecret],
 *   payload: await request.text(),
 *   signature: request.headers.get(SIGNATURE_HEADER),
 * });
 * if (event.type === "flag.updated") console.log(event.data.flag);
 * ```
 */
export async function verifyEvent(options: VerifyOptions): Promise<WebhookEvent> {
  const { secret, payload, signature } = options;
  assertSecret(secret);
  assertPayload(payload);
  return verifiedEvent(secret, payload, signature);
}

/** verifyEvent for callers that validated `secret` and `payload` already (the adapters). */
export async function verifiedEvent(
  secret: Secret,
  payload: Payload,
  signature: VerifyOptions["signature"],
): Promise<WebhookEvent> {
  if (isMissing(signature)) throw missingSignature();
  if (!(await matches(secret, payload, signature))) {
    throw new WebhookError("invalid_signature", `${SIGNATURE_HEADER} header is not the HMAC-SHA256 of the body`);
  }
  return parseEvent(payload);
}

export function isMissing(signature: VerifyOptions["signature"]): boolean {
  // An empty string and an empty list both have length 0.
  return signature == null || signature.length === 0;
}

export function missingSignature(): WebhookError {
  return new WebhookError("missing_signature", `missing ${SIGNATURE_HEADER} header`);
}
