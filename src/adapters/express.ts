import type { IncomingMessage, ServerResponse } from "node:http";
import type { WebhookEvent } from "../events.js";
import { nodeBody } from "../node/body-source.js";
import { sendAnswer } from "../node/respond.js";
import { watchAnswer } from "../node/watch-answer.js";
import type { HandlerOptions } from "../receiver/options.js";
import type { Accepted, Answer, Delivery } from "../receiver/protocol.js";
import { createReceiver } from "../receiver/receiver.js";
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
 * `maxAge`, `dedupe`, `bodyTimeout`, hooks), and an optional `onEvent(event, req, res)`, whose
 * `req` and `res` are Express's own `Request` and `Response` where the middleware is mounted on
 * an Express app (Node's own on a plain `node:http` server).
 */
export type ExpressWebhookOptions<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
> = HandlerOptions<[req: Req, res: Res]>;

const FIX =
  "mount webhookMiddleware before express.json(), express.text() or any other body parser on this route, " +
  'use express.raw({ type: "*/*" }) for it, or keep the bytes with express.json({ verify: keepRawBody }); ' +
  "in NestJS, create the app with NestFactory.create(AppModule, { rawBody: true }); in a Next.js API route, " +
  "add export const config = { api: { bodyParser: false } }; on Vercel, set NODEJS_HELPERS=0 or export a fetch-style POST";

/**
 * Express (and Connect, and plain `node:http`) middleware that verifies each delivery.
 * With `onEvent`, it runs it and answers itself (so `next` may be left out: a Next.js or Vercel
 * `(req, res)` function can be the middleware itself): 204 (or the reply `onEvent` returns, or what it
 * wrote to `res`), 500 `handler_error` if it throws. Without `onEvent`, it puts the typed event
 * on `req.webhookEvent` and calls `next()`; with `dedupe`, the claim stands until the route ends its
 * answer, whatever the client does meanwhile: a 2xx marks the event handled, and leaves once the
 * store has it; any other status (or `res.destroy()`) releases it. A refused delivery is answered with its status and
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
export function webhookMiddleware<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
>(options: ExpressWebhookOptions<Req, Res>): (req: Req, res: Res, next?: (error?: unknown) => void) => Promise<void> {
  // The route after us, or onEvent, is the handler: the delivery is settled with the answer Node
  // actually sends, whatever the client does meanwhile. Without onEvent that answer is also the
  // only sign the route finished.
  const endsHandler = options?.onEvent === undefined;
  const receiver = createReceiver<[Req, Res]>(options, {
    answered: (_req, res) => res.headersSent,
    watch: (accepted, _req, res) => watchAnswer(res, accepted, endsHandler),
  });

  return function flagWebhooksExpress(req, res, next) {
    // No await on the way to next(): the receiver answers synchronously what it can, and this is
    // the path every delivery takes (bench/http.mjs measures it against a hand-written receiver).
    // Whatever throws on the way (a rawBody getter, the route after us) rejects the promise
    // returned, as it did when this was an async function: it never throws at the caller.
    try {
      if (options.onEvent) {
        return receiver.handle(deliveryOf(req), req, res).then((answer) => {
          // undefined: the handler answered on `res` itself.
          if (answer && "status" in answer) sendAnswer(res, answer);
        });
      }
      if (typeof next !== "function") {
        // Checked before the request is touched: without onEvent there is nothing else to hand it to.
        throw new TypeError(
          "flag-webhooks: webhookMiddleware without onEvent needs next() to hand the event to a route",
        );
      }
      const result = receiver.accept(deliveryOf(req), req, res);
      if (!(result instanceof Promise)) return passOn(result, req, res, next);
      return result.then((accepted) => passOn(accepted, req, res, next));
    } catch (error) {
      return Promise.reject(error);
    }
  };
}

/**
 * Hands an accepted delivery to the next handler, or answers the refusal. Each call gets a promise
 * of its own, as from verifySignature: one shared by every request could be decorated by a caller
 * for all the others.
 */
function passOn(
  accepted: Accepted | Answer,
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
): Promise<void> {
  if (!("event" in accepted)) {
    sendAnswer(res, accepted);
    return Promise.resolve();
  }
  (req as WebhookRequest).webhookEvent = accepted.event;
  accepted.run(next);
  return Promise.resolve();
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
