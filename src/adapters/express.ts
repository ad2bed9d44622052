import type { IncomingMessage, ServerResponse } from "node:http";
import type { WebhookEvent } from "../events.js";
import { nodeBody } from "../node/body-source.js";
import { sendAnswer } from "../node/respond.js";
import { createReceiver, type Delivery, type HandlerOptions } from "../receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";

declare global {
  namespace Express {
    interface Request {
      /** The verified delivery, set by flag-webhooks' webhookMiddleware before `next()`. */
      webhookEvent?: WebhookEvent;
    }
  }
}

/** A Node request after {@link webhookMiddleware} accepted it (for plain `node:http` servers). */
export type WebhookRequest = IncomingMessage & { webhookEvent: WebhookEvent };

/**
 * Options of the Express {@link webhookMiddleware}: the receiver's options (`secret`, `limit`,
 * `maxAge`, `dedupe`, `bodyTimeout`, hooks), and an optional `onEvent(event, req, res)`.
 */
export type ExpressWebhookOptions = HandlerOptions<[req: IncomingMessage, res: ServerResponse]>;

const FIX =
  "mount webhookMiddleware before express.json(), express.text() or any other body parser on this route, " +
  'use express.raw({ type: "*/*" }) for it, or keep the bytes with express.json({ verify: keepRawBody }); ' +
  "in NestJS, create the app with NestFactory.create(AppModule, { rawBody: true })";

/**
 * Express (and Connect, and plain `node:http`) middleware that verifies each delivery.
 * With `onEvent`, it runs it and answers itself: 204 (or the reply `onEvent` returns, or what it
 * wrote to `res`), 500 `handler_error` if it throws. Without `onEvent`, it puts the typed event
 * on `req.webhookEvent` and calls `next()`; a route that answers 5xx (or never answers) counts as
 * a failed handler for `dedupe`. A refused delivery is answered with its status and
 * `{ "error": { "code", "message" } }`. It reads the raw body itself, so mount it before
 * `express.json()`; it also takes the bytes left by `express.raw()` or in `req.rawBody`.
 *
 * @example
 * ```ts
 * import express from "express";
 * import { webhookMiddleware } from "flag-webhooks/express";
 *
 * const app = express();
 * app.post("/webhooks", webhookMiddleware({ secret: process.env.WEBHOOK_SECRET! }), (req, res) => {
 *   console.log(req.webhookEvent?.type);
 *   res.sendStatus(204);
 * });
 * ```
 */
export function webhookMiddleware(
  options: ExpressWebhookOptions,
): (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => Promise<void> {
  const receiver = createReceiver(options);

  return async function flagWebhooksExpress(req, res, next) {
    if (options.onEvent) {
      const answer = await receiver.handle(deliveryOf(req), req, res);
      // The handler may have answered on `res` itself; otherwise the core's answer is written.
      if ("status" in answer && !res.headersSent) sendAnswer(res, answer);
      return;
    }
    const accepted = await receiver.accept(deliveryOf(req), req, res);
    if (!("event" in accepted)) {
      sendAnswer(res, accepted);
      return;
    }
    if (receiver.settles) {
      // The route after us is the handler: it failed if it answered 5xx or the connection
      // closed before it answered.
      res.once("finish", () => void accepted.settle(res.statusCode < 500));
      res.once("close", () => void accepted.settle(false));
    }
    (req as WebhookRequest).webhookEvent = accepted.event;
    next();
  };
}

/**
 * The `verify` function for `express.json()` (body-parser) that keeps the raw bytes on
 * `req.rawBody`, where {@link webhookMiddleware} finds them, so a route that must parse JSON
 * first can still be verified. Typed for body-parser's `verify` option.
 *
 * @example
 * ```ts
 * app.use(express.json({ limit: "1mb", verify: keepRawBody }));
 * app.post("/webhooks", webhookMiddleware({ secret }), (req, res) => res.sendStatus(204));
 * ```
 */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, buf: Uint8Array): void {
  // Through unknown: other packages declare rawBody on IncomingMessage with types of their own.
  (req as unknown as { rawBody: Uint8Array }).rawBody = buf;
}

function deliveryOf(req: IncomingMessage): Delivery {
  const request = req as IncomingMessage & { body?: unknown; rawBody?: unknown };
  return {
    method: req.method,
    signature: req.headers[SIGNATURE_HEADER],
    // A string req.body is text a parser decoded, not the bytes on the wire: only a Buffer counts.
    body: nodeBody(
      req,
      request.rawBody ?? (request.body instanceof Uint8Array ? request.body : undefined),
      "req.body",
      FIX,
    ),
  };
}
