import type { IncomingMessage, ServerResponse } from "node:http";
import type { WebhookEvent } from "../events.js";
import { nodeBody } from "../node/body-source.js";
import { watchAnswer } from "../node/watch-answer.js";
import type { HandlerOptions } from "../receiver/options.js";
import type { Accepted, Answer, Delivery } from "../receiver/protocol.js";
import { createReceiver } from "../receiver/receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";

/** The part of a Koa context the middleware uses, so Koa-style frameworks fit as well. */
export interface KoaLikeContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** `false` when the app writes `ctx.res` itself instead of letting Koa answer. */
  respond?: boolean;
  request: { rawBody?: unknown; body?: unknown };
  state: Record<string, unknown>;
  status: number;
  body: unknown;
  set(field: string, value: string): void;
}

/** `ctx.state` after {@link webhookMiddleware} accepted a delivery: `new Koa<WebhookState>()`. */
export interface WebhookState {
  webhookEvent: WebhookEvent;
}

/**
 * Options of the Koa {@link webhookMiddleware}: the receiver's options (`secret`, `limit`,
 * `maxAge`, `dedupe`, `bodyTimeout`, hooks), and an optional `onEvent(event, ctx)`, whose `ctx`
 * is the app's own context type where the middleware is mounted (`app.use`, a router's route).
 */
export type KoaWebhookOptions<Ctx extends KoaLikeContext = KoaLikeContext> = HandlerOptions<[ctx: Ctx]>;

const FIX =
  "mount webhookMiddleware before the body parser (@koa/bodyparser, koa-bodyparser, koa-body) on the webhook route, " +
  "so it reads the bytes itself";
// Where koa-body keeps the unparsed body with `includeUnparsed: true` (decoded text, like rawBody).
const UNPARSED = Symbol.for("unparsedBody");

/**
 * Koa (and Koa-style) middleware that verifies each delivery. With `onEvent`, it runs it and
 * answers itself: 204 (or the reply `onEvent` returns, or the body it set on `ctx`), 500
 * `handler_error` if it throws. Without `onEvent`, it sets `ctx.state.webhookEvent` and awaits
 * `next()`; with `dedupe`, a downstream that throws or answers anything but 2xx counts as a failed
 * handler (Koa answers 404 when no one sets a body or status).
 * A refused delivery gets its status and `{ "error": { "code", "message" } }` as `ctx.body`.
 * Mount it before any body parser: a parser's `rawBody` is decoded text, not the bytes (see
 * docs/koa.md).
 *
 * @example
 * ```ts
 * import Koa from "koa";
 * import { type WebhookState, webhookMiddleware } from "flag-webhooks/koa";
 *
 * const app = new Koa<WebhookState>();
 * app.use(webhookMiddleware({ secret: process.env.WEBHOOK_SECRET! }));
 * app.use((ctx) => {
 *   console.log(ctx.state.webhookEvent.type);
 *   ctx.status = 204;
 * });
 * ```
 */
export function webhookMiddleware<Ctx extends KoaLikeContext = KoaLikeContext>(
  options: KoaWebhookOptions<Ctx>,
): (ctx: Ctx, next: () => Promise<unknown>) => Promise<void> {
  // Koa writes the answer after the whole chain returned: the delivery is settled with what it
  // actually sends (its own 500 for a body it cannot send included), whatever the client does,
  // once the handler (onEvent, or the middleware after us) has finished.
  const claimed = new WeakMap<ServerResponse, Accepted>();
  const receiver = createReceiver<[Ctx]>(options, {
    answered: (ctx) => ctx.body != null || ctx.status !== 404,
    watch(accepted, ctx) {
      claimed.set(ctx.res, accepted);
      return watchAnswer(ctx.res, accepted, false);
    },
  });

  return async function flagWebhooksKoa(ctx, next) {
    if (options.onEvent) {
      const answer = await receiver.handle(deliveryOf(ctx), ctx);
      if (answer && "status" in answer) write(ctx, answer);
      settleIfUnwritten(ctx, ctx.status);
      return;
    }
    const accepted = await receiver.accept(deliveryOf(ctx), ctx);
    if (!("event" in accepted)) {
      write(ctx, accepted);
      return;
    }
    ctx.state.webhookEvent = accepted.event;
    try {
      await accepted.run(next);
    } catch (error) {
      accepted.finished(
        error === undefined ? new Error("the middleware after webhookMiddleware threw undefined") : error,
      );
      settleIfUnwritten(ctx, undefined);
      throw error;
    }
    accepted.finished();
    settleIfUnwritten(ctx, ctx.status);
  };

  /**
   * Koa writes nothing when the client is gone (`ctx.writable` is false): the handler's own
   * outcome then decides, at once, instead of the claim waiting out its lease.
   */
  function settleIfUnwritten(ctx: KoaLikeContext, status: number | undefined): void {
    const socket = ctx.res.socket;
    if (ctx.respond !== false && !ctx.res.writableEnded && socket && !socket.writable) {
      void claimed.get(ctx.res)?.answered(status);
    }
  }
}

function deliveryOf(ctx: KoaLikeContext): Delivery {
  const parsed = ctx.request.body as { [UNPARSED]?: unknown } | undefined;
  const raw = ctx.request.rawBody ?? (typeof parsed === "object" && parsed !== null ? parsed[UNPARSED] : undefined);
  return {
    method: ctx.req.method,
    signature: ctx.req.headers[SIGNATURE_HEADER],
    body: nodeBody(ctx.req, raw, "ctx.request.body", FIX),
  };
}

function write(ctx: KoaLikeContext, answer: Answer): void {
  ctx.status = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) ctx.set(name, value);
  if (answer.close) ctx.set("connection", "close");
  // An empty string, not null: Koa turns a null body into 204, or into the status text.
  ctx.body = answer.body ?? "";
}
