// Cloudflare Queues hand-off: the receiving Worker answers 202 once the queue has the
// event, and a consumer Worker runs each event, validated again, with per-message ack and retry.

import { WebhookError } from "../errors.js";
import { parseJsonBody, type WebhookEvent } from "../events.js";
import type { WebhookReply } from "../receiver/options.js";
import type { Secret } from "../signature.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";
import { withTimeout } from "../util/timeout.js";
import { checkKey, checkKeys, readMessage, writeMessage } from "./message.js";

/** The part of a Queue producer binding (`env.FLAG_EVENTS`) {@link enqueueTo} uses. */
export interface EventQueue {
  send(message: WebhookEvent, options?: { contentType?: "json" }): Promise<unknown>;
}

/** A message as the Workers runtime hands it to a `queue` handler (`Message`). */
export interface EventMessage {
  readonly id: string;
  readonly body: unknown;
  readonly attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}

/**
 * A batch as the Workers runtime hands it to a `queue` handler (`MessageBatch`); `Message` is the
 * runtime's own message type where the consumer names it (`Message<WebhookEvent>`).
 */
export interface EventBatch<Message extends EventMessage = EventMessage> {
  readonly queue: string;
  readonly messages: readonly Message[];
}

/** Options of {@link enqueueTo}. */
export interface EnqueueOptions {
  /**
   * How long to wait for `queue.send` to resolve, in ms or as a duration such as `"3s"`; past it
   * the delivery is answered `503 store_unavailable` so the sender retries. Default 3 s. At most 2³¹−1 ms
   * (a timer waits no longer), else a `TypeError`.
   */
  timeout?: number | string;
  /**
   * A key of the app's own (not the webhook secret) to sign each message with: the message gets
   * the HMAC-SHA256 of the event's JSON under this key, so {@link consumeEvents} with the same key
   * in `verifyWith` hands on only messages this receiver sent. Default: none, messages are not
   * signed, and any producer bound to the queue can send events the consumer will run.
   */
  signWith?: string;
}

const ACCEPTED: WebhookReply = { status: 202 };

/**
 * The most bytes an event's message may hold: Cloudflare Queues takes messages of at most 128 KB
 * (128,000 bytes), of which up to ~100 bytes are the queue's own metadata. A bigger one is refused
 * by `send` every time, so the sender's retries could never get it through.
 */
const MESSAGE_LIMIT = 128_000 - 100;
const utf8 = new TextEncoder();

/**
 * An `onEvent` for the fetch `webhookHandler` that sends each verified event to a Cloudflare
 * Queue (as JSON) and answers `202` once `queue.send` resolved, that is once the queue has
 * durably stored it. When the send fails or does not resolve within `timeout`, it throws
 * `WebhookError("store_unavailable")`: the delivery is answered `503` and the sender retries.
 * Queues have no dedupe of their own: put `dedupe` with {@link DurableObjectDedupeStore} on the
 * receiver, so a duplicate delivery is answered as one and sends nothing.
 *
 * @example
 * ```ts
 * import { enqueueTo, type EventQueue } from "flag-webhooks/cloudflare";
 * import { webhookHandler } from "flag-webhooks/fetch";
 *
 * export default {
 *   fetch: (request: Request, env: { WEBHOOK_SECRET: string; FLAG_EVENTS: EventQueue }) =>
 *     webhookHandler({ secret: env.WEBHOOK_SECRET, maxAge: "5m", onEvent: enqueueTo(env.FLAG_EVENTS) })(request),
 * };
 * ```
 */
export function enqueueTo(
  queue: EventQueue,
  options: EnqueueOptions = {},
): (event: WebhookEvent) => Promise<WebhookReply> {
  if (typeof queue?.send !== "function") {
    throw new TypeError("flag-webhooks: enqueueTo(queue) needs a Queue producer binding");
  }
  const timeout = options.timeout === undefined ? 3000 : parseDuration(options.timeout, "timeout", TIMER_MAX);
  const key = checkKey(options.signWith, "enqueueTo");

  return async function enqueueEvent(event) {
    const body = await writeMessage(event, key);
    const size = utf8.encode(JSON.stringify(body)).length;
    if (size > MESSAGE_LIMIT) {
      // Not a 503: a retry would be refused alike, for ever. The way out: docs/queues.md.
      throw new WebhookError(
        "payload_too_large",
        `the event is ${size} bytes as a queue message, over the ${MESSAGE_LIMIT} bytes a Cloudflare Queues message holds`,
      );
    }
    try {
      // JSON, which the dashboard can preview; the runtime's default (v8) would carry this data alike.
      // Stryker disable next-line ObjectLiteral: the default content type carries JSON data alike
      const sent = queue.send(body, { contentType: "json" });
      await withTimeout(sent, timeout, () => new Error(`the queue did not accept the event within ${timeout} ms`));
    } catch (cause) {
      throw new WebhookError("store_unavailable", "the event queue is unavailable; retry later", { cause });
    }
    return ACCEPTED;
  };
}

/**
 * Options of {@link consumeEvents}: `Env` is the Worker's bindings, `Ctx` its execution context
 * and `Message` its message type, each inferred from the handler type the consumer is assigned
 * to (`ExportedHandler<Env, WebhookEvent>`) or given to `createRouter`.
 */
export interface ConsumeEventsOptions<Env = unknown, Ctx = unknown, Message extends EventMessage = EventMessage> {
  /**
   * Runs each event, typed (`event.type` narrows; a router from `createRouter` fits), with its
   * message, the Worker's `env` and the execution context. The message is acked when it resolves
   * and retried (`message.retry()`, up to the consumer's `max_retries`, then its dead-letter
   * queue) when it throws.
   */
  onEvent: (event: WebhookEvent, message: Message, env: Env, ctx: Ctx) => unknown;
  /**
   * Told of a message that holds no valid event (a `WebhookError` `invalid_payload`; the message
   * is acked, since a retry cannot fix it) and of an error `onEvent` threw (the message is
   * retried). Default: `console.error` with the message id and the error, never the body.
   */
  onError?: (error: unknown, message: Message) => void;
  /**
   * The key {@link enqueueTo} signs with (`signWith`), or a list of keys while rotating (newest
   * first): each message must carry a signature made with one of them. A message without a valid
   * one never reaches `onEvent`: it is acked (a retry cannot sign it) and reported to `onError` as
   * a `WebhookError` `invalid_signature`. Default: none, any message that holds a valid event is
   * handed on, whoever sent it.
   */
  verifyWith?: Secret;
}

/**
 * A Workers `queue(batch, env, ctx)` handler for the queue {@link enqueueTo} feeds. Each message,
 * in batch order, one at a time, is validated with the same parser as the receiver
 * (`parseEvent`; with `verifyWith`, its signature is checked first), then handed to `onEvent`:
 * acked when it resolves, retried when it throws. A message that is not a valid event, or not
 * signed with a `verifyWith` key, is acked and reported to `onError`, not retried for ever.
 * Delivery is at least once (a retried batch, a consumer that crashed after the handler ran):
 * make the handler idempotent, by `event.id`.
 *
 * @example
 * ```ts
 * import { createRouter } from "flag-webhooks";
 * import { consumeEvents } from "flag-webhooks/cloudflare";
 *
 * const router = createRouter().on("flag.updated", (event) => console.log(event.data.flag, event.data.changes));
 * export default { queue: consumeEvents({ onEvent: router }) };
 * ```
 */
export function consumeEvents<Env = unknown, Ctx = unknown, Message extends EventMessage = EventMessage>(
  options: ConsumeEventsOptions<Env, Ctx, Message>,
): (batch: EventBatch<Message>, env: Env, ctx: Ctx) => Promise<void> {
  const { onEvent, onError = report, verifyWith } = options ?? ({} as ConsumeEventsOptions<Env, Ctx, Message>);
  if (typeof onEvent !== "function") throw new TypeError('flag-webhooks: option "onEvent" must be a function');
  if (typeof onError !== "function") throw new TypeError('flag-webhooks: option "onError" must be a function');
  const keys = checkKeys(verifyWith, "consumeEvents");

  return async function queue(batch, env, ctx) {
    for (const message of batch.messages) {
      let event: WebhookEvent;
      try {
        event = await readMessage(dataOf(message.body), keys);
      } catch (error) {
        message.ack();
        tell(onError, error, message);
        continue;
      }
      try {
        await onEvent(event, message, env, ctx);
        message.ack();
      } catch (error) {
        message.retry();
        tell(onError, error, message);
      }
    }
  };
}

/** A message body as JSON data: JSON text or bytes (the `text` and `bytes` content types) parsed. */
function dataOf(body: unknown): unknown {
  return typeof body === "string" || body instanceof ArrayBuffer || ArrayBuffer.isView(body)
    ? parseJsonBody(body)
    : body;
}

function tell<Message extends EventMessage>(
  onError: (error: unknown, message: Message) => void,
  error: unknown,
  message: Message,
): void {
  try {
    onError(error, message);
  } catch {
    // A reporter that throws must not change what happens to the other messages.
  }
}

function report(error: unknown, message: EventMessage): void {
  const code = error instanceof WebhookError ? ` (${error.code}: acked, not retried)` : " (retried)";
  console.error(`flag-webhooks: queue message ${message.id} failed${code}:`, error);
}
