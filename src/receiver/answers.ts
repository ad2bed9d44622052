// Every answer the receiver gives, in framework-neutral terms: refusals in the service's error
// shape, the handler's own replies, duplicates. One status rule decides what counts as handled.
import { toErrorBody, WebhookError, type WebhookErrorCode } from "../errors.js";
import { DUPLICATE_HEADER } from "../store-contract/enlist.js";
import type { WebhookReply } from "./options.js";
import type { Answer } from "./protocol.js";

/** Seconds a sender should wait before retrying, for the refusals that ask for a retry. */
const RETRY_AFTER: Partial<Record<WebhookErrorCode, string>> = { delivery_in_progress: "5", store_unavailable: "10" };
/**
 * Refusals answered before the body was read (or while it still arrives): the connection is
 * closed after the answer, so an unsigned or oversized body is never drained.
 */
const CLOSE = new Set<WebhookErrorCode>([
  "payload_too_large",
  "body_timeout",
  "method_not_allowed",
  "missing_signature",
]);
/** Whether an answer means the event was handled: 2xx, and nothing else. */
export function isSuccess(status: number | undefined): boolean {
  return status !== undefined && status >= 200 && status <= 299;
}

/** The answer when the handler gave none: 204. */
export function noContent(): Answer {
  return { status: 204, headers: {}, body: null, close: false };
}

/** The answer to a copy of an event already handled: 204 with `webhook-duplicate: true`. */
export function duplicateAnswer(): Answer {
  return { status: 204, headers: { [DUPLICATE_HEADER]: "true" }, body: null, close: false };
}

/**
 * Renders any failure as the answer to send. A WebhookError keeps its status and message;
 * anything else is a bug or an application error, answered 500 without its message.
 */
export function errorResponse(error: unknown): Answer {
  const known: WebhookError =
    error instanceof WebhookError ? error : new WebhookError("handler_error", "the webhook handler failed");
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (known.code === "method_not_allowed") headers.allow = "POST";
  const retryAfter = RETRY_AFTER[known.code];
  if (retryAfter) headers["retry-after"] = retryAfter;
  return {
    status: known.status,
    headers,
    body: JSON.stringify(toErrorBody(known)),
    close: CLOSE.has(known.code),
  };
}

/**
 * The answer to what `onEvent` returned, when the adapter does not answer it natively: the
 * {@link WebhookReply} it returned, or 204. A result that cannot be answered as it is (a status
 * that is no HTTP status, another adapter's answer, headers that cannot be sent, a body JSON
 * cannot hold) throws: it is a handler failure, answered 500, never a 2xx that marks it done.
 */
export function replyAnswer(value: unknown): Answer {
  if (!isReply(value)) return noContent();
  const headers: Record<string, string> = { ...value.headers };
  for (const [name, header] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name) || BAD_VALUE.test(String(header))) {
      throw new TypeError(
        `flag-webhooks: onEvent returned a reply header ${JSON.stringify(name.slice(0, 40))} that cannot be sent`,
      );
    }
  }
  let body: string | null = null;
  if (typeof value.body === "string") {
    body = value.body;
  } else if (value.body !== undefined && value.body !== null) {
    body = JSON.stringify(value.body);
    if (!Object.keys(headers).some((name) => name.toLowerCase() === "content-type")) {
      headers["content-type"] = "application/json; charset=utf-8";
    }
  }
  return { status: value.status, headers, body, close: false };
}

/** A status a reply may carry: a whole number from 200 to 599. */
export function isStatus(status: unknown): status is number {
  return Number.isInteger(status) && (status as number) >= 200 && (status as number) <= 599;
}

/** An HTTP header name (RFC 9110 token), and a value with no line break or NUL. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[\r\n\0]/;

/**
 * Whether `onEvent` returned a reply: a plain object with a `status`. One whose status is no HTTP
 * status (`"503"`, `600`, `503.5`) throws: it is a mistake, not a 204.
 */
function isReply(value: unknown): value is WebhookReply {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  // Another adapter's answer (a fetch Response, a Lambda result) here would be a 204 the handler
  // did not mean.
  if (
    // The check keeps instanceof from throwing where there is no Response; every runtime we support has one.
    // Stryker disable next-line ConditionalExpression: equivalent where Response exists.
    (typeof Response === "function" && value instanceof Response) ||
    (prototype === Object.prototype && "statusCode" in value && !("status" in value))
  ) {
    throw new TypeError(
      "flag-webhooks: onEvent returned a Response or a Lambda result, which this adapter does not answer with; return { status } instead",
    );
  }
  if (!("status" in value) || (prototype !== Object.prototype && prototype !== null)) return false;
  const { status } = value as { status: unknown };
  if (isStatus(status)) return true;
  throw new TypeError(
    `flag-webhooks: onEvent returned a reply whose status ${JSON.stringify(String(status)).slice(0, 40)} is not a whole number from 200 to 599`,
  );
}
