import type { WebhookEvent } from "../events.js";
import type { HandlerOptions, ReceiverOptions } from "../receiver/options.js";
import type { Delivery } from "../receiver/protocol.js";
import { createReceiver } from "../receiver/receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";
import { readRequestBody } from "../web/read-body.js";
import { handledResponse, responseStatus } from "../web/respond.js";

/**
 * Options of {@link webhookHandler}: the receiver's options (`secret`, `limit`, `maxAge`,
 * `dedupe`, hooks), and `onEvent(event, request)`, whose returned `Response` is sent as it is.
 */
export interface WebhookHandlerOptions extends HandlerOptions<[request: Request]> {
  /**
   * Called with each verified event; the delivery is answered once it resolves: with the
   * Response it returns, if it returns one, else 204 (or the `{ status }` reply it returns). If it
   * throws, the answer is 500 `handler_error` without the thrown message, so the service retries.
   * With `dedupe`, only a 2xx answer marks the event handled.
   */
  onEvent: (event: WebhookEvent, request: Request) => unknown;
}

const FIX =
  "pass the Request to flag-webhooks before reading its body (request.json(), request.text(), or c.req.json() " +
  "in Hono), or hand it request.clone() if something must read it first";

/**
 * Verifies a fetch-style Request (Next.js route handlers, Hono's `c.req.raw`, Bun, Deno,
 * Cloudflare Workers) and returns its typed event. Throws {@link WebhookError}. Takes the
 * receiver's options but `dedupe` and `telemetry`, which need to know when a handler finished: use
 * {@link webhookHandler} for that.
 *
 * @example
 * ```ts
 * export async function POST(request: Request) {
 *   try {
 *     const event = await verifyRequest(request, { secret: process.env.WEBHOOK_SECRET!, maxAge: "5m" });
 *     return new Response(null, { status: 204 });
 *   } catch (error) {
 *     if (error instanceof WebhookError) return Response.json(toErrorBody(error), { status: error.status });
 *     throw error;
 *   }
 * }
 * ```
 */
export async function verifyRequest(
  request: Request,
  options: Omit<ReceiverOptions, "dedupe" | "telemetry">,
): Promise<WebhookEvent> {
  return createReceiver({ ...options, dedupe: undefined, telemetry: undefined }).verify(deliveryOf(request));
}

/**
 * A complete fetch handler: `(request) => Promise<Response>`. Verifies each delivery, awaits
 * `onEvent`, and answers 204; a refused delivery gets its status and
 * `{ "error": { "code", "message" } }`. Options are checked when it is created.
 *
 * @example
 * ```ts
 * // Next.js: app/webhooks/route.ts. Made on the first request: `next build` evaluates the
 * // module without the deployment's secrets, and the options are checked when it is made.
 * let handler: ((request: Request) => Promise<Response>) | undefined;
 * export function POST(request: Request): Promise<Response> {
 *   handler ??= webhookHandler({
 *     secret: process.env.WEBHOOK_SECRET!,
 *     onEvent: (event) => console.log(event.type, event.id),
 *   });
 *   return handler(request);
 * }
 * ```
 */
export function webhookHandler(options: WebhookHandlerOptions): (request: Request) => Promise<Response> {
  const receiver = createReceiver(options, { native: responseStatus });
  if (typeof options.onEvent !== "function") throw new TypeError('flag-webhooks: option "onEvent" must be a function');

  return async function flagWebhooksFetch(request) {
    return handledResponse(await receiver.handle(deliveryOf(request), request));
  };
}

function deliveryOf(request: Request): Delivery {
  return {
    method: request.method,
    signature: request.headers.get(SIGNATURE_HEADER),
    body: (limit) => readRequestBody(request, limit, FIX),
  };
}
