import type { Context, Env, MiddlewareHandler } from "hono";
import type { WebhookEvent } from "../events.js";
import type { Payload } from "../payload.js";
import type { HandlerOptions } from "../receiver/options.js";
import type { Delivery } from "../receiver/protocol.js";
import { createReceiver } from "../receiver/receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";
import { readRequestBody } from "../web/read-body.js";
import { handledResponse, responseStatus, toResponse } from "../web/respond.js";

/**
 * The Hono environment {@link webhookMiddleware} adds to a route: `c.var.webhookEvent` (and
 * `c.get("webhookEvent")`) is the verified event in the handlers after it.
 */
export interface WebhookEnv {
  Variables: { webhookEvent: WebhookEvent };
}

/**
 * Options of the Hono {@link webhookMiddleware}: the receiver's options (`secret`, `limit`,
 * `maxAge`, `dedupe`, hooks), and an optional `onEvent(event, c)`.
 */
export type HonoWebhookOptions = HandlerOptions<[c: Context]>;

const FIX =
  "call webhookMiddleware before c.req.json(), c.req.formData(), a validator or any other middleware that reads " +
  "the body on this route (a body read with c.req.text(), c.req.arrayBuffer(), c.req.bytes() or c.req.parseBody() " +
  "is reused, but not one read from c.req.raw directly)";

/**
 * The part of Hono's `c.req` the middleware reads: the raw Request and Hono's cache of its body
 * (typed as values by Hono, holding promises of them at run time).
 */
interface HonoRequestLike {
  raw: Request;
  bodyCache: {
    arrayBuffer?: ArrayBuffer | Promise<ArrayBuffer>;
    blob?: Blob | Promise<Blob>;
    text?: string | Promise<string>;
  };
}

/**
 * Hono middleware that verifies each delivery. Without `onEvent`, it puts the typed event on the
 * context, `c.var.webhookEvent` / `c.get("webhookEvent")`, and awaits `next()`; with `dedupe`, a
 * route that throws or answers anything but 2xx counts as a failed handler. With `onEvent`, it runs it and
 * answers itself: 204, the `{ status }` reply `onEvent` returns, or the `Response` it returns;
 * 500 `handler_error` if it throws. A refused delivery gets its status and
 * `{ "error": { "code", "message" } }`. It reads the body itself from `c.req.raw`; a body already
 * read through `c.req.text()` or `c.req.arrayBuffer()` is taken from Hono's cache, and the handlers
 * after it can still call `c.req.json()`. The type parameter is the app's own environment, for a
 * middleware made inside another one (`webhookMiddleware<{ Bindings: Bindings }>(…)(c, next)`).
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { webhookMiddleware } from "flag-webhooks/hono";
 *
 * const app = new Hono();
 * app.post("/webhooks", webhookMiddleware({ secret: process.env.WEBHOOK_SECRET! }), (c) => {
 *   console.log(c.var.webhookEvent.type);
 *   return c.body(null, 204);
 * });
 * ```
 */
// biome-ignore lint/complexity/noBannedTypes: `{}` is Hono's own "no environment" (BlankEnv).
export function webhookMiddleware<E extends Env = {}>(options: HonoWebhookOptions): MiddlewareHandler<E & WebhookEnv> {
  const receiver = createReceiver(options, { native: responseStatus });

  return async function flagWebhooksHono(c, next) {
    if (options.onEvent) return handledResponse(await receiver.handle(deliveryOf(c.req), c));
    const accepted = await receiver.accept(deliveryOf(c.req), c);
    if (!("event" in accepted)) return toResponse(accepted);
    c.set("webhookEvent", accepted.event);
    try {
      await accepted.run(next);
    } catch (error) {
      accepted.finished(error === undefined ? new Error("the handler after webhookMiddleware threw undefined") : error);
      await accepted.answered(undefined);
      throw error;
    }
    // Hono catches what a handler throws, answers through app.onError, and keeps it on c.error; a
    // route that returned no Response leaves the context unfinalized, and Hono answers 500.
    accepted.finished(c.error);
    const instead = await accepted.answered(c.error === undefined && c.finalized ? c.res.status : undefined);
    // The route's 2xx could not be recorded (or it failed after answering): the receiver's answer
    // goes out in its place.
    if (instead) c.res = toResponse(instead);
  };
}

function deliveryOf(req: HonoRequestLike): Delivery {
  return {
    method: req.raw.method,
    signature: req.raw.headers.get(SIGNATURE_HEADER),
    body: (limit) => honoBody(req, limit),
  };
}

/**
 * The raw body: Hono's cached copy when a body method ran before us (arrayBuffer, bytes and
 * parseBody cache the exact bytes; text and json cache the text, whose UTF-8 encoding is what is
 * verified and parsed), else the stream, read once and left in the cache for the handlers after us.
 */
async function honoBody(req: HonoRequestLike, limit: number): Promise<Payload> {
  const { arrayBuffer, blob, text } = req.bodyCache;
  if (arrayBuffer) return await arrayBuffer;
  if (blob) return (await blob).arrayBuffer();
  if (text) return text;
  const bytes = await readRequestBody(req.raw, limit, FIX);
  const exact = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  req.bodyCache.arrayBuffer = Promise.resolve((exact ? bytes : bytes.slice()).buffer as ArrayBuffer);
  return bytes;
}
