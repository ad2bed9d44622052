import type { IncomingMessage, ServerResponse } from "node:http";
import type { WebhookEvent } from "../events.js";
import { nodeBody } from "../node/body-source.js";
import { sendError } from "../node/respond.js";
import { createReceiver, type ReceiverOptions } from "../receiver.js";
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
 * Express (and Connect, and plain `node:http`) middleware that verifies each delivery and puts
 * the typed event on `req.webhookEvent` before calling `next()`. A refused delivery is answered
 * with its status and `{ "error": { "code", "message" } }`, and `next` is not called. It reads
 * the raw body itself, so mount it before `express.json()`; it also takes the bytes left by
 * `express.raw()` or in `req.rawBody`.
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
  options: ReceiverOptions,
): (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => Promise<void> {
  const receive = createReceiver(options);

  return async function flagWebhooksExpress(req, res, next) {
    const request = req as IncomingMessage & { body?: unknown; rawBody?: unknown; webhookEvent?: WebhookEvent };
    let event: WebhookEvent;
    try {
      event = await receive({
        method: req.method,
        signature: req.headers[SIGNATURE_HEADER],
        // A string req.body is text a parser decoded, not the bytes on the wire: only a Buffer counts.
        body: nodeBody(
          req,
          request.rawBody ?? (request.body instanceof Uint8Array ? request.body : undefined),
          "req.body",
        ),
      });
    } catch (error) {
      sendError(res, error);
      return;
    }
    request.webhookEvent = event;
    next();
  };
}
