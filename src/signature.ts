import { backend } from "./crypto/index.js";
import { assertPayload, type Payload } from "./payload.js";

/**
 * The header that carries a delivery's signature, lower-case as Node presents header names
 * (`req.headers[SIGNATURE_HEADER]`); `Headers.get` is case-insensitive, so it works there too.
 */
export const SIGNATURE_HEADER = "service-signature";

/** An endpoint secret, or several during a rotation: a delivery signed with any one passes. */
export type Secret = string | readonly string[];

/** Options of {@link sign}. */
export interface SignOptions {
  /** The endpoint secret; its UTF-8 bytes are the HMAC key. */
  secret: string;
  /** The exact bytes to sign; a string means its UTF-8 bytes. */
  payload: Payload;
}

/** Options of {@link verifySignature} and {@link verifyEvent}. */
export interface VerifyOptions {
  /** The endpoint secret, or a non-empty list of them while rotating (newest first is fastest). */
  secret: Secret;
  /** The raw request body exactly as received; never a re-serialised object. */
  payload: Payload;
  /**
   * The `Service-Signature` header as the framework gives it. `string[]` (a repeated header
   * in Node) and `null`/`undefined` (absent) are accepted and never verify.
   */
  signature: string | readonly string[] | null | undefined;
}

// The spec's signature is the lowercase hex digest and a receiver must check the header
// *equals* it, so the format is checked exactly before anything is decoded: hex decoders such
// as Buffer.from(x, "hex") stop silently at the first bad character.
const SIGNATURE_FORMAT = /^[0-9a-f]{64}$/;

const SECRET_REQUIRED = 'flag-webhooks: option "secret" must be a non-empty string, or a list of them to verify';

/**
 * Computes the `Service-Signature` of a payload: the lowercase hex HMAC-SHA256 of its bytes,
 * keyed with the UTF-8 bytes of the secret. Useful to sign test deliveries.
 *
 * @example
 * ```ts
 * const body = JSON.stringify(event);
 * const signature = await sign({ secret: "s3cr3t", payload: body });
 * await fetch(url, { method: "POST", body, headers: { [SIGNATURE_HEADER]: signature } });
 * ```
 */
export async function sign(options: SignOptions): Promise<string> {
  const { secret, payload } = options;
  if (typeof secret !== "string" || secret === "") {
    throw new TypeError(SECRET_REQUIRED);
  }
  assertPayload(payload);
  return backend.sign(secret, payload);
}

/**
 * Checks a delivery's signature against the raw body, in constant time. Resolves `false` for a
 * missing, malformed or wrong signature, and never throws for one; it throws `TypeError` only
 * for a programming error (no secret, or a payload that is not raw bytes).
 *
 * @example
 * ```ts
 * const ok = await verifySignature({
 *   secret: [process.env.WEBHOOK_SECRET, process.env.WEBHOOK_SECRET_OLD],
 *   payload: rawBody,
 *   signature: req.headers[SIGNATURE_HEADER],
 * });
 * if (!ok) return res.status(401).end();
 * ```
 */
export function verifySignature(options: VerifyOptions): Promise<boolean> {
  // Not an async function: with node:crypto the answer is known now, and an async function adds
  // a microtask hop to each call (bench/micro.mjs). Errors still reject, never throw, as an async
  // function's do. Each call gets a promise of its own: one shared by every caller could be
  // decorated by one of them (a `then` assigned to it) for all the others.
  try {
    const { secret, payload, signature } = options;
    assertSecret(secret);
    assertPayload(payload);
    const index = matchingSecret(secret, payload, signature);
    if (typeof index === "number") return Promise.resolve(index >= 0);
    return index.then((found) => found >= 0);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * The check itself, for callers that validated `secret` and `payload` already: the index of the
 * secret the signature matches (0 for a single secret), or -1 when none does.
 */
export function matchingSecret(secret: Secret, payload: Payload, signature: unknown): number | Promise<number> {
  return typeof signature === "string" && SIGNATURE_FORMAT.test(signature)
    ? backend.verify(secret, payload, signature)
    : -1;
}

/**
 * Throws the TypeError for a missing secret: a configuration mistake must fail loudly, not turn
 * into a 401 for every delivery. The message never contains the secret itself.
 */
export function assertSecret(secret: unknown): asserts secret is Secret {
  if (typeof secret === "string") {
    if (secret !== "") return;
  } else if (Array.isArray(secret) && secret.length > 0) {
    if (secret.every((s) => typeof s === "string" && s !== "")) return;
  }
  throw new TypeError(SECRET_REQUIRED);
}
