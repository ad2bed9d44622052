// flag-webhooks/testing: realistic, signed deliveries for testing a receiver without the service.
// Imports only the core and Web APIs, so it runs wherever the core runs (Node, Bun, Deno, Workers).
import type { KnownWebhookEvent, WebhookEventType } from "../events.js";
import { type DeliveryOptions, headersFor, payloadOf, type SignedDelivery } from "./sign.js";

export {
  type LambdaContextOptions,
  type LambdaEventOptions,
  type LambdaTestContext,
  type LambdaTestEventV1,
  type LambdaTestEventV2,
  lambdaContext,
  signedLambdaEvent,
} from "./lambda.js";
export type { DeliveryOptions, SignedDelivery } from "./sign.js";

/** The event type {@link createEvent} returns for `type`: `EventOfType<"flag.updated">` is `FlagUpdatedEvent`. */
export type EventOfType<Type extends WebhookEventType> = Extract<KnownWebhookEvent, { type: Type }>;

/**
 * Overrides for {@link createEvent}: any part of the event, at any depth. Nested objects are
 * merged into the defaults; arrays and everything else replace the default value.
 */
export type EventOverrides<Event> = Event extends readonly unknown[]
  ? Event
  : Event extends object
    ? { [Key in keyof Event]?: EventOverrides<Event[Key]> }
    : Event;

/** Options of {@link signedRequest}. */
export type RequestOptions = DeliveryOptions & {
  /** Where the request goes; default `"http://localhost/webhooks"`. */
  url?: string | URL;
};

/**
 * Creates a valid event of the given type, as the service would send it: a fresh `id` on every
 * call, `createdAt` now, `environment` `"production"`, and for `flag.updated` a change and an
 * actor. `overrides` are merged in depth: nested objects keep the fields you do not name, arrays
 * and other values replace the default, and `undefined` leaves a default alone. The service does
 * not document the `data` of other event types, so theirs is only `{ flag: "new-checkout" }`:
 * override it with what your receiver expects.
 *
 * @example
 * ```ts
 * const event = createEvent("flag.updated", { data: { flag: "dark-mode" } });
 * event.data.changes; // the default change, kept: [{ path: "on", from: false, to: true }]
 * ```
 */
export function createEvent<Type extends WebhookEventType>(
  type: Type,
  // Without "type": the first argument alone decides the type, so the return type narrows.
  overrides?: EventOverrides<Omit<EventOfType<Type>, "type">>,
): EventOfType<Type> {
  if (!DATA[type]) {
    throw new TypeError(`flag-webhooks/testing: unknown event type ${JSON.stringify(type)}`);
  }
  const event = {
    id: `evt_${globalThis.crypto.randomUUID().replaceAll("-", "")}`,
    type,
    createdAt: new Date().toISOString(),
    environment: "production",
    data: DATA[type](),
  };
  return merge(event, overrides) as EventOfType<Type>;
}

// Functions, so that every event gets its own objects and arrays to change.
const DATA: Record<WebhookEventType, () => object> = {
  "flag.updated": () => ({
    flag: "new-checkout",
    changes: [{ path: "on", from: false, to: true }],
    actor: { type: "user", email: "dana@example.com" },
  }),
  "flag.created": () => ({ flag: "new-checkout" }),
  "flag.deleted": () => ({ flag: "new-checkout" }),
  "rollout.step": () => ({ flag: "new-checkout" }),
  "rollout.guard_triggered": () => ({ flag: "new-checkout" }),
};

function merge(base: unknown, override: unknown): unknown {
  if (override === undefined) return base;
  if (!isPlainObject(base) || !isPlainObject(override)) return override;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    // defineProperty, so that an own "__proto__" key (from JSON.parse) stays a field.
    Object.defineProperty(merged, key, {
      value: merge(merged[key], value),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return merged;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Signs an event or a body with `secret` and returns the body, as a string, with the headers
 * the service sends. Pass the string to your HTTP client as it is: supertest sends a string
 * unchanged, whereas it re-serialises a `Buffer` sent with a JSON content type.
 *
 * @example
 * ```ts
 * const { body, headers } = await signedDelivery({ secret: "s3cr3t", event: createEvent("flag.updated") });
 * const response = await supertest(app).post("/webhooks").set(headers).send(body);
 * ```
 */
export async function signedDelivery(options: DeliveryOptions): Promise<SignedDelivery> {
  const payload = payloadOf(options);
  let body: string;
  if (typeof payload === "string") {
    body = payload;
  } else {
    try {
      body = strictUtf8.decode(payload);
    } catch {
      throw new TypeError(
        "flag-webhooks/testing: signedDelivery returns the body as a string, so it must be UTF-8; use signedRequest to send other bytes",
      );
    }
  }
  return { body, headers: await headersFor(options.secret, payload) };
}

/**
 * Signs an event or a body with `secret` and returns it as a POST `Request`, for fetch-style
 * handlers (`webhookHandler`, Next.js route handlers, Hono, Workers).
 *
 * @example
 * ```ts
 * const request = await signedRequest({ secret: "s3cr3t", event: createEvent("flag.deleted") });
 * const response = await handler(request);
 * ```
 */
export async function signedRequest(options: RequestOptions): Promise<Request> {
  const payload = payloadOf(options);
  return new Request(options.url ?? "http://localhost/webhooks", {
    method: "POST",
    headers: await headersFor(options.secret, payload),
    // A copy (a string's is the string): the Request's body stays what was signed even if the
    // caller reuses the array, and bytes over a SharedArrayBuffer, which Request refuses, go too.
    body: payload.slice(),
  });
}
export { type FlagHistoryOptions, FlagMirror, flagHistory, inOrder, shuffledCopy } from "./order.js";
