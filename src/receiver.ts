import { toErrorBody, WebhookError } from "./errors.js";
import type { WebhookEvent } from "./events.js";
import { parseLimit } from "./limit.js";
import type { Payload } from "./payload.js";
import { isMissing, missingSignature, verifiedEvent } from "./receive.js";
import { assertSecret, type Secret } from "./signature.js";

const utf8 = new TextEncoder();

/** Options every adapter takes. */
export interface ReceiverOptions {
  /** The endpoint secret, or a non-empty list of them while rotating. */
  secret: Secret;
  /**
   * The largest body accepted, in bytes or as a size such as `"512kb"`; default 1 MiB. A body of
   * exactly `limit` bytes passes, one byte more is refused with `payload_too_large` (413).
   */
  limit?: number | string;
}

/** What an adapter hands the core about one request. */
export interface Delivery {
  method: string | undefined;
  signature: string | readonly string[] | null | undefined;
  /**
   * Yields the raw body, reading at most `limit` bytes; throws `payload_too_large` past it and
   * `body_already_parsed` when a body parser left no raw bytes.
   */
  body(limit: number): Payload | Promise<Payload>;
}

/** The core's answer to a refused request, which every adapter writes as it is. */
export interface ErrorResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Close the connection after answering: the rest of an oversized body is not worth reading. */
  close: boolean;
}

/**
 * The one decision-maker behind every adapter: checks the options once, then turns each
 * request into an event or a WebhookError, always in the same order: method (405), signature
 * present (401, before any byte of the body is read), body (500/413), signature (401), event (400).
 */
export function createReceiver(options: ReceiverOptions): (delivery: Delivery) => Promise<WebhookEvent> {
  if (typeof options !== "object" || options === null) {
    throw new TypeError('flag-webhooks: options with a "secret" are required');
  }
  const { secret } = options;
  assertSecret(secret);
  const limit = parseLimit(options.limit);

  return async function receive(delivery) {
    if (delivery.method !== "POST") {
      throw new WebhookError("method_not_allowed", `method ${delivery.method} not allowed: deliveries are POST`);
    }
    const { signature } = delivery;
    if (isMissing(signature)) throw missingSignature();
    const body = await delivery.body(limit);
    // A string body (left by a body parser as rawBody) is measured, and verified, as UTF-8 bytes.
    const payload = typeof body === "string" ? utf8.encode(body) : body;
    if (payload.byteLength > limit) throw payloadTooLarge(limit);
    return verifiedEvent(secret, payload, signature);
  };
}

/**
 * Renders any failure as the response to send. A WebhookError keeps its status and message;
 * anything else is a bug or an application error, answered 500 without its message.
 */
export function errorResponse(error: unknown): ErrorResponse {
  const known = error instanceof WebhookError ? error : new WebhookError("handler_error", "the webhook handler failed");
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (known.code === "method_not_allowed") headers.allow = "POST";
  return {
    status: known.status,
    headers,
    body: JSON.stringify(toErrorBody(known)),
    close: known.code === "payload_too_large",
  };
}

export function payloadTooLarge(limit: number): WebhookError {
  return new WebhookError("payload_too_large", `body is larger than the limit of ${limit} bytes`);
}

/** The explanation users need when a body parser ran first: name the cause and the fix. */
export function bodyAlreadyParsed(where: string): WebhookError {
  return new WebhookError(
    "body_already_parsed",
    `${where} was already parsed and no raw bytes are left, so the signature cannot be checked: ` +
      "mount the webhook middleware before any JSON or text body parser (e.g. express.json()), " +
      "or use express.raw() for this route",
  );
}
