import type { OrderStore, WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";

// How the order property tests deliver one shuffled history: every copy at once, copy i to
// receiver i modulo their number (several instances of one endpoint, one store each). Bundled into
// the Durable Objects fixture too (test/fixtures/cloudflare/objects.ts), so that on workerd the
// deliveries are made by Workers next to the objects, as in production, rather than proxied one
// by one from Node: the same code decides what "at once" means in both places.

/** One turn of the event loop: Node's setImmediate, or a timer of 0 ms where there is none (workerd). */
function turn(): Promise<void> {
  return new Promise((resolve) => {
    if (typeof setImmediate === "function") setImmediate(resolve);
    else setTimeout(resolve, 0);
  });
}

/** What {@link deliverAtOnce} found: each request's status, and what the handlers saw, in the order they finished. */
export interface AtOnce {
  statuses: number[];
  seen: WebhookEvent[];
}

/**
 * Sends `requests` all at once through fetch receivers with `secret`, one per store, request i to
 * receiver i modulo their number. Each handler records its event after a turn of the event loop,
 * so that deliveries of one flag would overlap if nothing held it.
 */
export async function deliverAtOnce(stores: OrderStore[], secret: string, requests: Request[]): Promise<AtOnce> {
  const seen: WebhookEvent[] = [];
  const handlers = stores.map((store) =>
    webhookHandler({
      secret,
      // Long enough for a machine so loaded that a store's request takes seconds: the property
      // is the order of what handlers see; the default bounds have tests of their own.
      order: { store, timeout: "60s" },
      onEvent: async (event) => {
        await turn();
        seen.push(event);
      },
    }),
  );
  const answers = await Promise.all(
    requests.map((request, i) => (handlers[i % handlers.length] as (typeof handlers)[number])(request)),
  );
  return { statuses: answers.map((answer) => answer.status), seen };
}
