import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { WebhookEvent } from "../events.js";
import { nodeBody } from "../node/body-source.js";
import { HELD_END, watchAnswer } from "../node/watch-answer.js";
import type { HandlerOptions } from "../receiver/options.js";
import type { Answer, Delivery } from "../receiver/protocol.js";
import { createReceiver } from "../receiver/receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The verified delivery, set by flag-webhooks' webhookPlugin on its own route before
     * `onEvent` runs; hooks of that context (`onSend`, `onResponse`) see it too.
     */
    webhookEvent?: WebhookEvent;
  }
}

/**
 * Options of {@link webhookPlugin}: the route's `path`, the receiver's options (`secret`,
 * `limit`, `maxAge`, `dedupe`, `bodyTimeout`, hooks), and `onEvent(event, request, reply)`.
 */
export interface FastifyWebhookOptions extends HandlerOptions<[request: FastifyRequest, reply: FastifyReply]> {
  /** The route's URL, such as `"/webhooks"` (after the `prefix` you register the plugin with). */
  path: string;
  /**
   * Runs each verified event. The delivery is answered 204 once it resolves, or with the
   * {@link WebhookReply} it returns, unless it answered with `reply.send()` itself. If it throws,
   * the answer is `500 handler_error` without the thrown message, so the service retries.
   */
  onEvent: (event: WebhookEvent, request: FastifyRequest, reply: FastifyReply) => unknown;
}

const FIX =
  "something read request.raw before webhookPlugin: keep preParsing hooks and express.json() (via @fastify/express " +
  "or @fastify/middie) off its route, or keep the bytes in request.rawBody (fastify-raw-body)";

/**
 * A Fastify 5 plugin that adds one webhook route in its own encapsulated context: it reads the
 * raw bytes of that route itself (any Content-Type, or none; the app's other routes keep their
 * parsers), verifies them, runs `onEvent(event, request, reply)` and answers 204. Every refusal
 * is answered with its status and `{ "error": { "code", "message" } }`, a body over `limit`
 * with our 413 (Fastify's `bodyLimit` does not apply to this route), any method but POST with
 * 405 and `Allow: POST`. Options are checked when the plugin loads: `register`/`ready` rejects.
 *
 * @example
 * ```ts
 * import Fastify from "fastify";
 * import { webhookPlugin } from "flag-webhooks/fastify";
 *
 * const app = Fastify();
 * await app.register(webhookPlugin, {
 *   path: "/webhooks",
 *   secret: process.env.WEBHOOK_SECRET!,
 *   onEvent: (event, request) => request.log.info({ id: event.id }, event.type),
 * });
 * ```
 */
export const webhookPlugin: FastifyPluginAsync<FastifyWebhookOptions> = Object.assign(
  // Async, so that a bad option rejects `register`/`ready` instead of throwing inside Fastify's loader.
  async function flagWebhooksFastify(app: FastifyInstance, options: FastifyWebhookOptions) {
    for (const [name, type] of [
      ["path", "string"],
      ["onEvent", "function"],
    ] as const) {
      if (typeof options?.[name] !== type) throw new TypeError(`flag-webhooks: option "${name}" must be a ${type}`);
    }
    const { onEvent } = options;
    const receiver = createReceiver<[FastifyRequest, FastifyReply]>(
      {
        ...options,
        // The app's own logger by default, so an error is one JSON line like the rest of its logs.
        onError: options.onError ?? logToRequest,
        onEvent(event, request, reply) {
          request.webhookEvent = event;
          settlesWhenEnded(reply);
          return onEvent(event, request, reply);
        },
      },
      {
        answered: (_request, reply) => reply.sent,
        // Settled with what Node sends on reply.raw, once it is ended: also for a hijacked reply.
        watch: (accepted, _request, reply) => watchAnswer(reply.raw, accepted, false),
      },
    );

    async function answerDelivery(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
      const answer = await receiver.handle(deliveryOf(request), request, reply);
      // undefined: onEvent answered with reply.send() itself.
      if (answer && !reply.sent) send(reply, answer as Answer);
      return reply;
    }

    // This plugin is NOT wrapped with fastify-plugin, on purpose: the parser below must stay in
    // this context, or it would replace the app's JSON parser on every route. Removing every
    // parser here and adding a catch-all one that reads nothing leaves the stream to us, so our
    // `limit` and `bodyTimeout` apply (Fastify's bodyLimit only bounds parsers that read).
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", (_request, _payload, parsed) => parsed(null));
    // Fastify refuses a malformed Content-Type header (415), and a QUERY without one (400),
    // before any parser runs; the signature covers bytes, not their media type, so such a
    // request still gets the core's answer. Any other error goes on to the app's error handler.
    app.setErrorHandler((error: FastifyError, request, reply) => {
      if (/^FST_ERR_(CTP_INVALID_MEDIA_TYPE|ROUTE_MISSING_CONTENT_TYPE)$/.test(error.code)) {
        return answerDelivery(request, reply);
      }
      throw error;
    });
    if (!app.hasRequestDecorator("webhookEvent")) app.decorateRequest("webhookEvent", undefined);
    // Every method Fastify routes, so that anything but POST gets the core's 405 with Allow: POST.
    app.all(options.path, answerDelivery);
  },
  { [Symbol.for("fastify.display-name")]: "flag-webhooks" },
);

/**
 * A Fastify reply is a thenable that resolves once the answer has been sent ("finish"), and the
 * handler that sends a stream returns it, as Fastify asks (`return reply.send(stream)`). Held
 * until the handler has finished, that answer would never finish: the reply resolves once its
 * answer has ended instead, held or not.
 */
function settlesWhenEnded(reply: FastifyReply): void {
  const { then } = reply;
  // biome-ignore lint/suspicious/noThenProperty: the reply is Fastify's own thenable; only when it resolves changes.
  reply.then = function thenWhenEnded(this: FastifyReply, fulfilled, rejected) {
    if (!this.sent) this.raw.once(HELD_END, () => fulfilled());
    return then.call(this, fulfilled, rejected);
  };
}

function logToRequest(error: unknown, request: FastifyRequest): void {
  request.log.error({ err: error }, "flag-webhooks: onEvent, a hook or the dedupe store failed");
}

function deliveryOf(request: FastifyRequest): Delivery {
  const raw = (request as { rawBody?: unknown }).rawBody;
  return {
    method: request.method,
    signature: request.headers[SIGNATURE_HEADER],
    body: nodeBody(request.raw, raw, "the request stream (request.raw)", FIX),
  };
}

function send(reply: FastifyReply, answer: Answer): void {
  reply.code(answer.status).headers(answer.headers);
  if (answer.close) reply.header("connection", "close");
  reply.send(answer.body ?? undefined);
}
