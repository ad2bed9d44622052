import { checkRetention } from "../delivery/replay-window.js";
import type { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import { assertSecret, type Secret } from "../signature.js";
import type { DedupeStore } from "../store-contract/dedupe-store.js";
import { type Inbox, inboxOf } from "../store-contract/enlist.js";
import type { Telemetry } from "../telemetry.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";
import { parseLimit } from "../util/limit.js";
import { type OrderOptions, type OrderSettings, orderSettings } from "./order.js";
import { logError } from "./report.js";

/** Dedupe by event id: see docs/delivery.md. */
export interface DedupeOptions {
  /** Where handled ids are kept: a {@link MemoryDedupeStore} for one process, a {@link RedisDedupeStore} for a fleet. */
  store: DedupeStore;
  /**
   * How long a handled id is remembered, in ms or as a duration such as `"24h"`. With `maxAge`, it
   * must be at least `maxAge` plus twice the minute of clock skew allowed (a TypeError says so
   * otherwise): an event may be dated a minute ahead of one receiver's clock and replayed to
   * another whose clock is a minute behind, and until then it must still be a known duplicate.
   */
  ttl: number | string;
  /**
   * How long a claim of a delivery still being handled lasts (default 60 s): a copy that arrives
   * meanwhile gets `409 delivery_in_progress`; if the process dies mid-handler, the sender's
   * retry runs it after this. Longer than your slowest handler.
   */
  inFlightTtl?: number | string;
  /**
   * How long to wait for the store before answering `503 store_unavailable` (default 2 s; at most
   * 2³¹−1 ms, the longest timer Node keeps). Marking a handled id done is retried within this time.
   */
  timeout?: number | string;
  /**
   * When the store fails (Redis down), run the handler anyway, without dedupe (`true`), instead
   * of answering `503 store_unavailable` so the sender retries later (`false`, the default).
   * Availability over exactly-once: a copy delivered while the store is down may run twice.
   */
  failOpen?: boolean;
}

/** What `onVerified` is told besides the event. */
export interface VerifiedInfo {
  /**
   * Which secret of the `secret` list signed the delivery (0 for a single secret): once the old
   * secret's index stops appearing, it can be dropped.
   */
  secretIndex: number;
}

/** Options every adapter takes. */
export interface ReceiverOptions {
  /** The endpoint secret, or a non-empty list of them while rotating. */
  secret: Secret;
  /**
   * The largest body accepted, in bytes or as a size such as `"512kb"`; default 1 MiB. A body of
   * exactly `limit` bytes passes, one byte more is refused with `payload_too_large` (413).
   */
  limit?: number | string;
  /**
   * The replay window on `createdAt` (ms, or a duration such as `"5m"`); off by default. Older
   * events, and events dated over a minute ahead, are refused with `event_expired` (401).
   */
  maxAge?: number | string;
  /** Handle each event id once: `{ store, ttl }`. Off by default. */
  dedupe?: DedupeOptions;
  /** Apply each flag's changes in order, last writer wins per field: `{ store }` (docs/order.md). Off by default. */
  order?: OrderOptions;
  /**
   * The longest wait for the whole body once a request arrived, in ms or as a duration; then
   * `408 body_timeout` and the connection is closed. Default 10 s, at most 2³¹−1 ms. Node adapters
   * (a fetch runtime bounds this itself).
   */
  bodyTimeout?: number | string;
  /** Told of every authentic delivery, with the index of the secret that matched. Never sees a secret. */
  onVerified?: (event: WebhookEvent, info: VerifiedInfo) => void;
  /** Told of every refused delivery (code and status on the error). Never sees a secret or signature. */
  onRejected?: (error: WebhookError) => void;
  /**
   * The clock, in ms since the epoch, for `maxAge`; for tests. Default `Date.now`. A value that is
   * not a finite number refuses the delivery (500, reported to `onError`): the replay window
   * fails closed.
   */
  now?: () => number;
  /**
   * Traces and metrics of every delivery: `openTelemetry()` from `flag-webhooks/otel`, or any
   * {@link Telemetry}. Off by default, and then it costs nothing.
   */
  telemetry?: Telemetry;
}

/**
 * What `onEvent` may return to choose the answer (any adapter): `{ status: 202 }`, with an
 * optional JSON-able or string `body` and `headers`. Returning nothing answers 204.
 */
export interface WebhookReply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/** Options of an adapter that runs a handler: the receiver's, plus `onEvent` and `onError`. */
export interface HandlerOptions<Context extends unknown[]> extends ReceiverOptions {
  /**
   * Runs each verified event; the delivery is answered once it resolves: 204, or the
   * {@link WebhookReply} it returns (an answer it wrote through the framework itself wins). If it
   * throws, the answer is `500 handler_error` (without its message), or the thrown
   * {@link WebhookError}'s own status and message (such as `503 store_unavailable`). With
   * `dedupe`, the event id is marked handled only when the final answer is 2xx, and a 2xx leaves
   * only once the store has it; a throw or any other status releases the claim, once the handler
   * has finished, so the sender's retry runs it again. A {@link Router} is a valid `onEvent`.
   */
  onEvent?: (event: WebhookEvent, ...context: Context) => unknown;
  /**
   * Told of an error thrown by `onEvent`, a hook or the dedupe store. Default: one line on
   * `console.error` (Fastify: the request's logger).
   */
  onError?: (error: unknown, ...context: Context) => void;
}

/** The dedupe options, checked and in milliseconds. */
export interface DedupeSettings {
  store: DedupeStore;
  ttl: number;
  inFlightTtl: number;
  timeout: number;
  failOpen: boolean;
}

/** Every option, checked once when a receiver is made, in the units the pipeline uses. */
export interface Settings<Context extends unknown[]> {
  secret: Secret;
  limit: number;
  maxAge: number | undefined;
  bodyTimeout: number;
  dedupe: DedupeSettings | undefined;
  order: OrderSettings | undefined;
  onEvent: ((event: WebhookEvent, ...context: Context) => unknown) | undefined;
  /** The inbox `onEvent` is the handler of (`inbox.handle(fn)`), if it is one. */
  inbox: Inbox | undefined;
  /** `onError`, or the default one-line log. */
  // biome-ignore lint/suspicious/noExplicitAny: called with the adapter's own context types after the error.
  onError: (error: unknown, ...context: any[]) => void;
  onVerified: ((event: WebhookEvent, info: VerifiedInfo) => void) | undefined;
  onRejected: ((error: WebhookError) => void) | undefined;
  now: () => number;
  telemetry: Telemetry | undefined;
}

const DEFAULT_BODY_TIMEOUT = 10_000;
const DEFAULT_IN_FLIGHT = 60_000;
const DEFAULT_STORE_TIMEOUT = 2000;

/**
 * Checks every option when the receiver is made, so a mistake is a TypeError naming the option at
 * start-up rather than a failure at the first delivery.
 */
export function checkOptions<Context extends unknown[]>(options: HandlerOptions<Context>): Settings<Context> {
  if (typeof options !== "object" || options === null) {
    throw new TypeError('flag-webhooks: options with a "secret" are required');
  }
  const { secret, onVerified, onRejected, onEvent, now = Date.now, telemetry } = options;
  const onError = options.onError ?? logError;
  checkSecret(secret);
  for (const [name, hook] of Object.entries({ onEvent, onError, onVerified, onRejected, now })) {
    if (hook !== undefined && typeof hook !== "function") {
      throw new TypeError(`flag-webhooks: option "${name}" must be a function`);
    }
  }
  if (telemetry !== undefined && typeof telemetry?.delivery !== "function") {
    throw new TypeError('flag-webhooks: option "telemetry" must be a Telemetry, such as openTelemetry()');
  }
  const maxAge = options.maxAge === undefined ? undefined : parseDuration(options.maxAge, "maxAge");
  // A store that keeps the handler's effects (an inbox's handle()) remembers ids for its own
  // retention, which must outlast the replay window as dedupe.ttl must.
  const inbox = inboxOf(onEvent);
  if (inbox) checkRetention(inbox.retention, maxAge, "the inbox's retention");
  const dedupe = options.dedupe === undefined ? undefined : dedupeSettings(options.dedupe, maxAge);
  return {
    secret,
    limit: parseLimit(options.limit),
    maxAge,
    bodyTimeout:
      options.bodyTimeout === undefined
        ? DEFAULT_BODY_TIMEOUT
        : parseDuration(options.bodyTimeout, "bodyTimeout", TIMER_MAX),
    dedupe,
    order: options.order === undefined ? undefined : orderSettings(options.order, maxAge, dedupe?.store),
    onEvent,
    inbox,
    onError,
    onVerified,
    onRejected,
    now,
    telemetry,
  };
}

/**
 * The secret check, whose message, when a framework's build is evaluating the module, says how to
 * avoid it: a build (`next build` collecting a route's config) runs without the deployment's
 * secrets, so a handler made at module scope fails it, though the same code serves well.
 */
function checkSecret(secret: unknown): asserts secret is Secret {
  try {
    assertSecret(secret);
  } catch (error) {
    // The one sign a build gives: Next.js sets NEXT_PHASE while it evaluates modules. Read without
    // assuming a `process` (Workers, Deno and browsers may have none).
    const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
    if (env?.NEXT_PHASE !== "phase-production-build") throw error;
    throw new TypeError(
      `${(error as Error).message}. "next build" is evaluating this module, without the deployment's secrets: make the handler on the first request instead (flag-webhooks docs/hosts.md, Next.js)`,
    );
  }
}

function dedupeSettings(dedupe: DedupeOptions, maxAge: number | undefined): DedupeSettings {
  const store = dedupe?.store;
  if (
    !store ||
    typeof store.claim !== "function" ||
    typeof store.complete !== "function" ||
    typeof store.release !== "function"
  ) {
    throw new TypeError('flag-webhooks: option "dedupe.store" must be a DedupeStore (claim, complete, release)');
  }
  if (dedupe.ttl === undefined) throw new TypeError('flag-webhooks: option "dedupe.ttl" is required');
  const ttl = parseDuration(dedupe.ttl, "dedupe.ttl");
  checkRetention(ttl, maxAge, 'option "dedupe.ttl"');
  return {
    store,
    ttl,
    inFlightTtl:
      dedupe.inFlightTtl === undefined ? DEFAULT_IN_FLIGHT : parseDuration(dedupe.inFlightTtl, "dedupe.inFlightTtl"),
    timeout:
      dedupe.timeout === undefined ? DEFAULT_STORE_TIMEOUT : parseDuration(dedupe.timeout, "dedupe.timeout", TIMER_MAX),
    failOpen: dedupe.failOpen === true,
  };
}
