import type { IncomingMessage } from "node:http";
import type { WebhookEvent } from "../events.js";
import { nodeBody } from "../node/body-source.js";
import { createReceiver, errorResponse, type ReceiverOptions } from "../receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";

/** The part of a Koa context the middleware uses, so Koa-style frameworks fit as well. */
export interface KoaLikeContext {
  req: IncomingMessage;
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
 * Koa (and Koa-style) middleware that verifies each delivery, sets `ctx.state.webhookEvent` and
 * awaits `next()`. A refused delivery gets its status and `{ "error": { "code", "message" } }`
 * as `ctx.body`, and `next` is not called. Uses `ctx.request.rawBody` when a body parser kept it.
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
export function webhookMiddleware(
  options: ReceiverOptions,
): (ctx: KoaLikeContext, next: () => Promise<unknown>) => Promise<void> {
  const receive = createReceiver(options);

  return async function flagWebhooksKoa(ctx, next) {
    let event: WebhookEvent;
    try {
      event = await receive({
        method: ctx.req.method,
        signature: ctx.req.headers[SIGNATURE_HEADER],
        body: nodeBody(ctx.req, ctx.request.rawBody, "ctx.request.body"),
      });
    } catch (error) {
      const answer = errorResponse(error);
      ctx.status = answer.status;
      for (const [name, value] of Object.entries(answer.headers)) ctx.set(name, value);
      if (answer.close) ctx.set("connection", "close");
      ctx.body = answer.body;
      return;
    }
    ctx.state.webhookEvent = event;
    await next();
  };
}
