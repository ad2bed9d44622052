import { signedDelivery } from "flag-webhooks/testing";
import { startWorker } from "./cloudflare-bundle.js";

/**
 * The Worker of test/fixtures/cloudflare/queues.ts in workerd (miniflare), with two real queues:
 * `plain` (unsigned producer and consumer) and `signed` (producers with `signWith`, a consumer
 * with `verifyWith: [QUEUE_KEY, QUEUE_KEY_OLD]`), and what its consumers saw.
 */
export interface QueuesWorker {
  /** A delivery signed with the webhook secret, to `/plain` or `/signed/new|old|other`. */
  deliver(path: string, event: object): Promise<{ status: number }>;
  /** Sends `body` straight to a queue as another producer would (`json` data or `text`). */
  send(queue: "plain" | "signed", body: unknown, contentType?: "json" | "text"): Promise<void>;
  /** What reached onEvent, in order. */
  handled(): Promise<{ queue: string; event: Record<string, unknown> }[]>;
  /** What the consumers reported to onError, in order. */
  reported(): Promise<{ queue: string; id: string; attempts: number; code: string | null; message: string }[]>;
  dispose(): Promise<void>;
}

export const WEBHOOK_SECRET = "whsec-queues-test";
export const QUEUE_KEY = "queue-key-2026";
export const QUEUE_KEY_OLD = "queue-key-2025";

export async function startQueuesWorker(): Promise<QueuesWorker> {
  const mf = await startWorker("test/fixtures/cloudflare/queues.ts", {
    bindings: { WEBHOOK_SECRET, QUEUE_KEY, QUEUE_KEY_OLD },
    queueProducers: { PLAIN: "plain-events", SIGNED: "signed-events" },
    queueConsumers: {
      "plain-events": { maxBatchSize: 10, maxBatchTimeout: 0.05, maxRetries: 3, retryDelay: 0 },
      "signed-events": { maxBatchSize: 10, maxBatchTimeout: 0.05, maxRetries: 3, retryDelay: 0 },
    },
  });
  const get = async <T>(path: string) => (await (await mf.dispatchFetch(`http://worker${path}`)).json()) as T;
  return {
    async deliver(path, event) {
      const { body, headers } = await signedDelivery({ secret: WEBHOOK_SECRET, event });
      return mf.dispatchFetch(`http://worker${path}`, { method: "POST", headers, body });
    },
    async send(queue, body, contentType = "json") {
      const response = await mf.dispatchFetch("http://worker/send", {
        method: "POST",
        body: JSON.stringify({ queue, body, contentType }),
      });
      if (response.status !== 204) throw new Error(`the Worker answered ${response.status}: ${await response.text()}`);
    },
    handled: () => get("/handled"),
    reported: () => get("/reported"),
    dispose: () => mf.dispose(),
  };
}
