/**
 * Every way a delivery can be refused, with the HTTP status the receiver answers.
 * One table, so the core and every adapter answer the same delivery the same way.
 */
const STATUS = {
  missing_signature: 401,
  invalid_signature: 401,
  event_expired: 401,
  invalid_payload: 400,
  body_timeout: 408,
  payload_too_large: 413,
  method_not_allowed: 405,
  delivery_in_progress: 409,
  body_already_parsed: 500,
  handler_error: 500,
  store_unavailable: 503,
} as const;

/** The machine-readable reason a delivery was refused; see docs/errors.md. */
export type WebhookErrorCode = keyof typeof STATUS;

/**
 * The HTTP status answered for a code, or for any code: a union of literals, so it passes where a
 * framework wants a status it can send a body with (Hono's `ContentfulStatusCode`).
 */
export type WebhookErrorStatus<Code extends WebhookErrorCode = WebhookErrorCode> = (typeof STATUS)[Code];

// A registered symbol, not a class identity: a CommonJS and an ES module copy of this file
// (or two installed versions) can both be loaded in one process, and `instanceof` must still
// hold for an error thrown by either.
const BRAND: unique symbol = Symbol.for("flag-webhooks.WebhookError") as never;

/**
 * The only error flag-webhooks throws for bad input. `code` says why, `status` is the HTTP
 * status to answer with, and `message` is safe to send to the client: it never contains the
 * secret or the expected signature.
 *
 * @example
 * ```ts
 * try {
 *   const event = await verifyEvent({ secret, payload, signature });
 * } catch (err) {
 *   if (err instanceof WebhookError) return Response.json(toErrorBody(err), { status: err.status });
 *   throw err;
 * }
 * ```
 */
export class WebhookError<Code extends WebhookErrorCode = WebhookErrorCode> extends Error {
  /** Why the delivery was refused. */
  readonly code: Code;
  /** The HTTP status a receiver answers with for this code. */
  readonly status: WebhookErrorStatus<Code>;
  /** @internal brand checked by `instanceof`, see BRAND. */
  readonly [BRAND] = true;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "WebhookError";
    this.code = code;
    this.status = STATUS[code];
  }

  // A type predicate (TypeScript 5.3+ reads it for `instanceof`): without it `err instanceof
  // WebhookError` narrows to WebhookError<any>, and `err.code` is `any`.
  // On a subclass (`class QueueFull extends WebhookError`), `instanceof` is the usual prototype
  // check, and narrows to the subclass: only WebhookError itself answers by the brand.
  static override [Symbol.hasInstance]<T>(this: abstract new (...args: never[]) => T, value: unknown): value is T {
    // `this` is the class `instanceof` asks about, a subclass included: not WebhookError itself.
    // biome-ignore lint/complexity/noThisInStatic: the subclass, not WebhookError, is wanted here.
    if ((this as unknown) !== WebhookError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true;
  }
}

/** The service's error body shape, `{ "error": { "code", "message" } }` (spec section 7). */
export interface ErrorBody {
  error: { code: WebhookErrorCode; message: string };
}

/**
 * Renders a {@link WebhookError} in the service's error shape, ready to send as JSON.
 *
 * @example
 * ```ts
 * res.status(err.status).json(toErrorBody(err));
 * // { "error": { "code": "invalid_signature", "message": "..." } }
 * ```
 */
export function toErrorBody(error: WebhookError): ErrorBody {
  return { error: { code: error.code, message: error.message } };
}

/** The refusal of a body over the receiver's `limit`. */
export function payloadTooLarge(limit: number): WebhookError {
  return new WebhookError("payload_too_large", `body is larger than the limit of ${limit} bytes`);
}

/**
 * The explanation users need when a body parser ran first: what was parsed, and the fix in the
 * adapter's own terms (each adapter names its own).
 */
export function bodyAlreadyParsed(where: string, fix: string): WebhookError {
  return new WebhookError(
    "body_already_parsed",
    `${where} was already parsed and no raw bytes are left, so the signature cannot be checked: ${fix}`,
  );
}
