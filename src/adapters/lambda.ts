import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { Payload } from "../payload.js";
import type { HandlerOptions } from "../receiver/options.js";
import type { Answer, Delivery } from "../receiver/protocol.js";
import { createReceiver } from "../receiver/receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";

// Structural types of the events and results, so the package needs no runtime dependency and no
// @types/aws-lambda: API Gateway's (and @types/aws-lambda's) events are assignable to them.

/** An API Gateway REST API proxy event, or an HTTP API payload format 1.0 event. */
export interface LambdaProxyEventV1 {
  httpMethod: string;
  /** One value per header (the last one when it was repeated); names in any case. */
  headers?: Record<string, string | undefined> | null;
  /** Every value of every header; names in any case. */
  multiValueHeaders?: Record<string, string[] | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
}

/** An HTTP API payload format 2.0 event, or a Lambda function URL event (the same shape). */
export interface LambdaProxyEventV2 {
  requestContext: { http: { method: string } };
  /** Lowercase names; a repeated header's values joined with commas. */
  headers?: Record<string, string | undefined>;
  body?: string;
  isBase64Encoded?: boolean;
}

/** Any event {@link webhookHandler} takes. */
export type LambdaProxyEvent = LambdaProxyEventV1 | LambdaProxyEventV2;

/** The part of the Lambda context object passed on to `onEvent`. */
export interface LambdaContext {
  awsRequestId: string;
  getRemainingTimeInMillis(): number;
}

/** A proxy result, as API Gateway (REST and HTTP APIs) and function URLs read it. */
export interface LambdaProxyResult {
  statusCode: number;
  headers?: Record<string, string>;
  multiValueHeaders?: Record<string, string[]>;
  cookies?: string[];
  body: string;
  isBase64Encoded?: boolean;
}

/**
 * Options of the Lambda {@link webhookHandler}: the receiver's options (`secret`, `limit`,
 * `maxAge`, `dedupe`, hooks), and `onEvent(event, lambdaEvent, context)`. The type parameters are
 * the trigger's event and context types (from `@types/aws-lambda`, say), inferred from the
 * handler type you assign to.
 */
export interface LambdaWebhookOptions<
  Event extends LambdaProxyEvent = LambdaProxyEvent,
  Context extends LambdaContext = LambdaContext,
> extends HandlerOptions<[lambdaEvent: Event, context: Context]> {
  /**
   * Called with each verified event; the delivery is answered once it resolves: 204, the
   * `{ status }` reply it returns, or a proxy result (`{ statusCode, body }`) it returns, sent as
   * it is. If it throws, the answer is 500 `handler_error` without the thrown message. With
   * `dedupe`, only a 2xx answer marks the event handled.
   */
  onEvent: (event: WebhookEvent, lambdaEvent: Event, context: Context) => unknown;
}

/**
 * An AWS Lambda handler, `(event, context) => Promise<result>`, for API Gateway REST API proxy
 * integrations, HTTP APIs (payload format 1.0 or 2.0) and function URLs. Verifies each delivery over
 * the body's bytes (decoded when `isBase64Encoded`; `limit` counts decoded bytes), finds
 * `Service-Signature` in any case in `headers` or `multiValueHeaders` (a repeated header, or one
 * HTTP APIs joined with commas, is refused), awaits `onEvent`, and returns the answer as a proxy
 * result: numeric `statusCode`, string `body`, and a refusal in `{ "error": { "code", "message" } }`
 * with `content-type: application/json; charset=utf-8`. Options are checked when it is created.
 *
 * An event with no HTTP method (a queue's `{ Records }`, say) is answered 405 with a message that
 * says what it is.
 *
 * @example
 * ```ts
 * import { webhookHandler } from "flag-webhooks/lambda";
 *
 * export const handler = webhookHandler({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   onEvent: (event) => console.log(event.type, event.id),
 * });
 * ```
 */
export function webhookHandler<
  Event extends LambdaProxyEvent = LambdaProxyEvent,
  Context extends LambdaContext = LambdaContext,
>(options: LambdaWebhookOptions<Event, Context>): (event: Event, context: Context) => Promise<LambdaProxyResult> {
  const receiver = createReceiver<[Event, Context]>(options, { native: proxyResultStatus });
  if (typeof options.onEvent !== "function") throw new TypeError('flag-webhooks: option "onEvent" must be a function');

  return async function flagWebhooksLambda(event, context) {
    const answer = await receiver.handle(deliveryOf(event), event, context);
    return "native" in answer ? (answer.native as LambdaProxyResult) : toResult(answer);
  };
}

function deliveryOf(event: LambdaProxyEvent): Delivery {
  // Lambda hands over whatever the trigger sent: read it without trusting its shape.
  const e = (typeof event === "object" && event !== null ? event : {}) as Partial<LambdaProxyEventV1> &
    Partial<LambdaProxyEventV2>;
  const method = typeof e.httpMethod === "string" ? e.httpMethod : e.requestContext?.http?.method;
  return {
    method,
    notHttp: typeof method === "string" ? undefined : notHttp(event),
    signature: signatureOf(e.multiValueHeaders) ?? signatureOf(e.headers),
    body: () => bodyOf(e.body, e.isBase64Encoded === true),
  };
}

/** What an invocation with no HTTP method is, in words: the trigger is wired to the wrong function. */
function notHttp(event: unknown): string {
  const keys = typeof event === "object" && event !== null ? Object.keys(event).slice(0, 5) : [];
  const what = Array.isArray((event as { Records?: unknown } | null)?.Records)
    ? "a batch of Records (as SQS, SNS, S3, Kinesis and DynamoDB streams send)"
    : keys.length > 0
      ? `an event with the fields ${keys.map((key) => JSON.stringify(key.slice(0, 40))).join(", ")}`
      : `a ${event === null ? "null" : typeof event} event`;
  return (
    `this invocation is not an HTTP request: it is ${what}. webhookHandler answers deliveries through ` +
    "API Gateway (REST or HTTP API) or a function URL; connect the webhook route to it, and other triggers to other functions"
  );
}

/**
 * Every value of the signature header, under any spelling of its name. HTTP APIs join a repeated
 * header's values with commas, and a signature never holds one, so a comma means a repeat.
 */
function signatureOf(headers: Record<string, string | string[] | undefined> | null | undefined) {
  if (typeof headers !== "object" || headers === null) return undefined;
  const values: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (name.toLowerCase() !== SIGNATURE_HEADER || value == null) continue;
    for (const one of Array.isArray(value) ? value : [value]) values.push(...String(one).split(","));
  }
  return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
}

function bodyOf(body: unknown, base64: boolean): Payload {
  if (typeof body !== "string") return new Uint8Array(0);
  if (!base64) return body;
  let binary: string;
  try {
    binary = atob(body);
  } catch {
    // API Gateway never sends such a body: no signature can be over bytes that are not there, and
    // an unsigned request learns nothing but that (the signature's 401 comes first, as everywhere).
    throw new WebhookError(
      "invalid_signature",
      `the body is marked isBase64Encoded but is not base64, so ${SIGNATURE_HEADER} cannot be its HMAC-SHA256`,
    );
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function toResult(answer: Answer): LambdaProxyResult {
  // `close` has no meaning here: API Gateway owns the connection.
  return { statusCode: answer.status, headers: answer.headers, body: answer.body ?? "", isBase64Encoded: false };
}

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
  const status = typeof statusCode === "string" && /^\d{3}$/.test(statusCode) ? Number(statusCode) : statusCode;
  return Number.isInteger(status) && (body === undefined || body === null || typeof body === "string")
    ? (status as number)
    : Number.NaN;
}
