// How a value `onEvent` returned is answered, for the code that must agree with the answer without
// knowing the adapter (PostgresInbox commits exactly when the answer is 2xx).

/** The status of a proxy result `onEvent` built itself: a plain object with a whole statusCode. */
export function proxyResultStatus(value: unknown): number | undefined {
  if (
    typeof value !== "object" ||
    value === null ||
    Object.getPrototypeOf(value) !== Object.prototype ||
    !("statusCode" in value)
  ) {
    return undefined;
  }
  const { statusCode, body } = value as { statusCode: unknown; body?: unknown };
  // API Gateway reads a three-digit string too (AWS's own blueprints send one), but a body that is
  // not a string is its 502: such a result is a handler failure, never a 2xx that marks it done.
  // Stryker disable next-line ConditionalExpression: test() reads a number as its text, and a number whose text is three digits is that number
  const status = typeof statusCode === "string" && /^\d{3}$/.test(statusCode) ? Number(statusCode) : statusCode;
  return Number.isInteger(status) && (body === undefined || body === null || typeof body === "string")
    ? (status as number)
    : Number.NaN;
}

/**
 * Whether the receiver answers what `onEvent` returned with a status outside 2xx, in whichever
 * adapter answers it at all: a fetch `Response` (fetch, Hono) and a Lambda proxy result (Lambda)
 * by their own status, a `WebhookReply` (every adapter) by its `status`, and a reply whose status
 * is no HTTP status is a handler failure, answered 500. Anything else is answered 204. (An adapter
 * that cannot answer a `Response` or a Lambda result refuses it with a 500: then a 2xx one is
 * committed by the inbox and answered 500, and the sender's retry is a duplicate, never lost.)
 */
export function answeredAsFailure(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  let status: unknown;
  // Stryker disable next-line ConditionalExpression: every runtime the package supports has Response; the check keeps others from throwing
  if (typeof Response === "function" && value instanceof Response) status = value.status;
  else if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return false;
  else if ("status" in value) status = (value as { status: unknown }).status;
  else status = proxyResultStatus(value);
  if (status === undefined) return false;
  return !(Number.isInteger(status) && (status as number) >= 200 && (status as number) <= 299);
}
