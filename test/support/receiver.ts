import { type DedupeStore, MemoryDedupeStore, SIGNATURE_HEADER, type Telemetry } from "flag-webhooks";
import { type WebhookHandlerOptions, webhookHandler } from "flag-webhooks/fetch";
import { createEvent } from "flag-webhooks/testing";
import { signatureOf } from "./deliveries.js";

// The receiver as a fetch user sees it (real Request and Response objects), for the tests of its
// decisions in test/receiver/: one secret, deliveries signed with it, a handler with quiet
// defaults, answers as comparable values, and a store and a telemetry that write down each call.

export const SECRET = "receiver-secret";
export const JSON_TYPE = "application/json; charset=utf-8";

/** A flag.updated event's JSON, with a fresh id unless one is given. */
export function body(id?: string, createdAt = new Date().toISOString()): string {
  return JSON.stringify(createEvent("flag.updated", id === undefined ? { createdAt } : { id, createdAt }));
}

/** A POST of `text` to the handler, signed with {@link SECRET} unless other headers are given. */
export async function request(
  text = body(),
  init: { method?: string; headers?: Record<string, string> } = {},
): Promise<Request> {
  const { method = "POST", headers = { [SIGNATURE_HEADER]: await signatureOf(SECRET, text) } } = init;
  return new Request("http://localhost/webhooks", { method, headers, body: method === "POST" ? text : undefined });
}

export type Options = Partial<WebhookHandlerOptions>;

/** The fetch handler with {@link SECRET}, an onEvent that does nothing and a quiet onError, unless given. */
export const handler = (options: Options) =>
  webhookHandler({ secret: SECRET, onEvent: () => {}, onError: () => {}, ...options } as WebhookHandlerOptions);

/** A response as a comparable value: status, the headers that matter, and the body. */
export async function seen(response: Response) {
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    close: response.headers.get("connection"),
    allow: response.headers.get("allow"),
    retryAfter: response.headers.get("retry-after"),
    duplicate: response.headers.get("webhook-duplicate"),
    body: text === "" ? null : text.startsWith("{") ? JSON.parse(text) : text,
  };
}

/** An error body in the service's shape. */
export const error = (code: string, message: string) => ({ error: { code, message } });

/** The headers of a refusal, with {@link seen}: JSON, and none of the others unless a case says so. */
export const refusal = { type: JSON_TYPE, close: null, allow: null, retryAfter: null, duplicate: null };

/** A store (a MemoryDedupeStore unless given) that writes down each call made to it. */
export function recordingStore(store: DedupeStore = new MemoryDedupeStore()) {
  const calls: string[] = [];
  return {
    calls,
    claim(id: string, lease: number) {
      calls.push(`claim ${lease}`);
      return store.claim(id, lease);
    },
    complete(id: string, ttl: number) {
      calls.push(`complete ${ttl}`);
      return store.complete(id, ttl);
    },
    release(id: string) {
      calls.push("release");
      return store.release(id);
    },
  } satisfies DedupeStore & { calls: string[] };
}

/** A Telemetry that writes down what each delivery tells it, in order. */
export function recordingTelemetry() {
  const log: string[] = [];
  const telemetry: Telemetry = {
    delivery: () => ({
      verified: () => void log.push("verified"),
      store: (operation) => void log.push(`store ${operation}`),
      run: (fn) => fn(),
      handler: () => void log.push("handler"),
      end: (outcome, status) => void log.push(`end ${outcome} ${status}`),
    }),
  };
  return { log, telemetry };
}
