import type { WebhookEvent } from "../events.js";
import { createReceiver, errorResponse, type ReceiverOptions } from "../receiver.js";
import { SIGNATURE_HEADER } from "../signature.js";
import { readRequestBody } from "../web/read-body.js";

/** Options of {@link webhookHandler}. */
export interface WebhookHandlerOptions extends ReceiverOptions {
  /**
   * Called with each verified event; the delivery is answered once it resolves: with the
   * Response it returns, if it returns one, else 204. If it throws, the answer is 500 `handler_error` without the thrown
   * message, so the service retries.
   */
  onEvent: (event: WebhookEvent, request: Request) => unknown;
  /** Told of an error thrown by `onEvent`. Default: `console.error`. */
  onError?: (error: unknown, request: Request) => void;
}

/**
 * Verifies a fetch-style Request (Next.js route handlers, Hono's `c.req.raw`, Bun, Deno,
 * Cloudflare Workers) and returns its typed event. Throws {@link WebhookError}.
 *
 * @example
 * ```ts
 * export async function POST(request: Request) {
 *   try {
 *     const event = await verifyRequest(request, { secret: process.env.WEBHOOK_SECRET! });
 *     return new Response(null, { status: 204 });
 *   } catch (error) {
 *     if (error instanceof WebhookError) return Response.json(toErrorBody(error), { status: error.status });
 *     throw error;
 *   }
 * }
 * ```
 */
export async function verifyRequest(request: Request, options: ReceiverOptions): Promise<WebhookEvent> {
  return createReceiver(options)(deliveryOf(request));
}

/**
 * A complete fetch handler: `(request) => Promise<Response>`. Verifies each delivery, awaits
 * `onEvent`, and answers 204; a refused delivery gets its status and
 * `{ "error": { "code", "message" } }`. Options are checked when it is created.
 *
 * @example
 * ```ts
 * // Next.js: app/api/webhooks/route.ts
 * export const POST = webhookHandler({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   onEvent: (event) => console.log(event.type, event.id),
 * });
 * ```
 */
export function webhookHandler(options: WebhookHandlerOptions): (request: Request) => Promise<Response> {
  const receive = createReceiver(options);
  const { onEvent, onError = logError } = options;
  if (typeof onEvent !== "function") throw new TypeError('flag-webhooks: option "onEvent" must be a function');

  return async function flagWebhooksFetch(request) {
    let event: WebhookEvent;
    try {
      event = await receive(deliveryOf(request));
    } catch (error) {
      return toResponse(error);
    }
    try {
      const answer = await onEvent(event, request);
      return answer instanceof Response ? answer : new Response(null, { status: 204 });
    } catch (error) {
      onError(error, request);
      // The handler's own message may hold internals; the client gets the generic handler_error.
      return toResponse(undefined);
    }
  };
}

function deliveryOf(request: Request) {
  return {
    method: request.method,
    signature: request.headers.get(SIGNATURE_HEADER),
    body: (limit: number) => readRequestBody(request, limit),
  };
}

function toResponse(error: unknown): Response {
  const answer = errorResponse(error);
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}

function logError(error: unknown): void {
  console.error("flag-webhooks: onEvent threw; answered 500 handler_error", error);
}
