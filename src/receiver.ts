import { CLOCK_SKEW, checkAge } from "./delivery/replay-window.js";
import { payloadTooLarge, toErrorBody, WebhookError, type WebhookErrorCode } from "./errors.js";
import type { WebhookEvent } from "./events.js";
import type { Payload } from "./payload.js";
import { assertSecret, type Secret } from "./signature.js";
import type { ClaimResult, DedupeStore } from "./stores/contract.js";
import type { DeliveryTelemetry, Telemetry } from "./telemetry.js";
import { parseDuration, TIMER_MAX } from "./util/duration.js";
import { parseLimit } from "./util/limit.js";
import { isMissing, missingSignature, type Verified, verifiedEvent } from "./verify-event.js";

const utf8 = new TextEncoder();

/** Dedupe by event id: see docs/delivery.md. */
export interface DedupeOptions {
  /** Where handled ids are kept: a {@link MemoryDedupeStore} for one process, a {@link RedisDedupeStore} for a fleet. */
  store: DedupeStore;
  /**
   * How long a handled id is remembered, in ms or as a duration such as `"24h"`. With `maxAge`, it
   * must be at least `maxAge` plus the minute of clock skew allowed (a TypeError says so
   * otherwise), so a captured delivery is either too old or a known duplicate.
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
   * `dedupe`, the event id is marked handled only when the final answer is 2xx; a throw or any
   * other status releases the claim, so the sender's retry runs it again.
   * A {@link Router} is a valid `onEvent`.
   */
  onEvent?: (event: WebhookEvent, ...context: Context) => unknown;
  /**
   * Told of an error thrown by `onEvent`, a hook or the dedupe store. Default: one line on
   * `console.error` (Fastify: the request's logger).
   */
  onError?: (error: unknown, ...context: Context) => void;
}

/** What an adapter hands the core about one request. */
export interface Delivery {
  method: string | undefined;
  /** Why this is not an HTTP request at all (a Lambda invoked by a queue, say): the 405's message. */
  notHttp?: string;
  signature: string | readonly string[] | null | undefined;
  /**
   * Yields the raw body, reading at most `limit` bytes for at most `timeout` ms; throws
   * `payload_too_large` past the limit, `body_timeout` past the time, and
   * `body_already_parsed` when a body parser left no raw bytes.
   */
  body(limit: number, timeout: number): Payload | Promise<Payload>;
}

/** The answer to write, in any framework's terms. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  /** The body as text, or null for none. */
  body: string | null;
  /** Close the connection after answering: the rest of the body is not worth reading. */
  close: boolean;
}

/** A verified, fresh, claimed delivery whose handler is the adapter's `next()`. */
export interface Accepted {
  event: WebhookEvent;
  /**
   * Tells the core how the handler ended: the final status of its answer, or `undefined` when it
   * failed without one (threw, cut the connection). The core decides: a 2xx marks the event id
   * handled, anything else releases the claim so a retry runs it. Adapters only report; call it
   * once the handler finished, whatever the client did meanwhile, with what it threw if it threw.
   * Never rejects; later calls do nothing.
   */
  settle(status: number | undefined, error?: unknown): Promise<void>;
  /**
   * With `telemetry` only: runs the handler (the adapter's `next()`) inside the delivery's trace
   * context, so its own spans nest under the delivery's. Absent otherwise: call the handler.
   */
  run?<T>(handler: () => T): T;
  /**
   * With `telemetry` only: remembers what the handler threw, for an adapter whose `settle` comes
   * later from the wire (the answer the framework writes for the error).
   */
  fail?(error: unknown): void;
}

/** What an adapter tells the core about answers it writes itself. */
export interface AdapterHooks<Context extends unknown[]> {
  /**
   * The status of an `onEvent` result the adapter answers with itself (a fetch `Response`, a
   * Lambda proxy result), or `undefined` for any other value.
   */
  native?(value: unknown): number | undefined;
  /**
   * Whether `onEvent` answered through the framework (`res`, `ctx`, `reply`): that answer stands,
   * and `handle` returns nothing to write.
   */
  answered?(...context: Context): boolean;
  /**
   * For adapters that see the answer on the wire (Node's `ServerResponse`): told of each claimed
   * delivery before its handler runs, the adapter settles it itself with the status actually
   * sent, whoever writes it and whenever; `handle` then never settles.
   */
  watch?(accepted: Accepted, ...context: Context): void;
}

/** A value `onEvent` returned that the adapter answers with itself (a fetch `Response`). */
export interface NativeReply {
  native: unknown;
}

/** The one decision-maker behind every adapter. */
export interface Receiver<Context extends unknown[]> {
  /** Checks a request up to the handler: the event to hand on, or the answer to send now. */
  accept(delivery: Delivery, ...context: Context): Accepted | Answer | Promise<Accepted | Answer>;
  /**
   * Verifies a request and checks its age, throwing what `accept` would answer: for adapters that
   * hand the event to the caller (`verifyRequest`). Runs the hooks; no dedupe.
   */
  verify(delivery: Delivery, ...context: Context): Promise<WebhookEvent>;
  /**
   * Accepts a request, runs `onEvent` and settles: the answer to write, a native reply to pass
   * on, or `undefined` when `onEvent` answered through the framework itself.
   */
  handle(delivery: Delivery, ...context: Context): Promise<Answer | NativeReply | undefined>;
}

const DEFAULT_BODY_TIMEOUT = 10_000;
const DEFAULT_IN_FLIGHT = 60_000;
const DEFAULT_STORE_TIMEOUT = 2000;
/** Seconds a sender should wait before retrying, for the refusals that ask for a retry. */
const RETRY_AFTER: Partial<Record<WebhookErrorCode, string>> = { delivery_in_progress: "5", store_unavailable: "10" };
/**
 * Refusals answered before the body was read (or while it still arrives): the connection is
 * closed after the answer, so an unsigned or oversized body is never drained.
 */
const CLOSE = new Set<WebhookErrorCode>([
  "payload_too_large",
  "body_timeout",
  "method_not_allowed",
  "missing_signature",
]);
/** The header that marks the answer to a duplicate delivery. */
export const DUPLICATE_HEADER = "webhook-duplicate";

/**
 * The one decision-maker behind every adapter: checks the options once, then turns each request
 * into an answer, always in the same order: method (405), signature present (401, before any
 * byte of the body is read), body (500/413/408), signature (401), event (400), replay window
 * (401), dedupe claim (duplicate 204, in progress 409, store down 503), handler (204/500).
 * Whether a delivery counts as handled is decided here, once: the handler finished and its final
 * answer is 2xx. Adapters only translate: a request in, what happened and the answer out.
 *
 * @param hooks what the adapter knows of answers it writes itself.
 */
export function createReceiver<Context extends unknown[]>(
  options: HandlerOptions<Context>,
  hooks: AdapterHooks<Context> = {},
): Receiver<Context> {
  if (typeof options !== "object" || options === null) {
    throw new TypeError('flag-webhooks: options with a "secret" are required');
  }
  const { secret, onVerified, onRejected, onEvent, onError = logError, now = Date.now, telemetry } = options;
  assertSecret(secret);
  const limit = parseLimit(options.limit);
  const maxAge = options.maxAge === undefined ? undefined : parseDuration(options.maxAge, "maxAge");
  const bodyTimeout =
    options.bodyTimeout === undefined
      ? DEFAULT_BODY_TIMEOUT
      : parseDuration(options.bodyTimeout, "bodyTimeout", TIMER_MAX);
  for (const [name, hook] of Object.entries({ onEvent, onError, onVerified, onRejected, now })) {
    if (hook !== undefined && typeof hook !== "function") {
      throw new TypeError(`flag-webhooks: option "${name}" must be a function`);
    }
  }
  if (telemetry !== undefined && typeof telemetry?.delivery !== "function") {
    throw new TypeError('flag-webhooks: option "telemetry" must be a Telemetry, such as openTelemetry()');
  }
  const dedupe = options.dedupe === undefined ? undefined : dedupeOptions(options.dedupe, maxAge);
  const { native, answered, watch } = hooks;

  /** Runs a hook for logs or metrics: whatever it throws changes no answer. */
  function tell(context: Context, hook: () => void): void {
    try {
      hook();
    } catch (error) {
      report(error, context);
    }
  }
  function report(error: unknown, context: Context): void {
    try {
      onError(error, ...context);
    } catch {
      // An onError that throws has nowhere left to report to.
    }
  }
  function refuse(error: unknown, context: Context, record?: DeliveryTelemetry): Answer {
    const answer = errorResponse(error);
    if (!(error instanceof WebhookError)) report(error, context);
    else if (onRejected) tell(context, () => onRejected(error));
    record?.end(error instanceof WebhookError ? error.code : "handler_error", answer.status);
    return answer;
  }

  /** A recorder for one delivery, whose failures are reported and change no answer. */
  function recorder(context: Context): DeliveryTelemetry | undefined {
    let record: DeliveryTelemetry | undefined;
    try {
      record = (telemetry as Telemetry).delivery();
    } catch (error) {
      report(error, context);
    }
    if (!record) return undefined;
    const safe =
      (name: "verified" | "store" | "handler" | "end") =>
      (...args: unknown[]): void => {
        try {
          (record[name] as (...args: unknown[]) => void)(...args);
        } catch (error) {
          report(error, context);
        }
      };
    return {
      verified: safe("verified"),
      store: safe("store"),
      handler: safe("handler"),
      end: safe("end"),
      run: (handler) => record.run(handler),
    };
  }

  function accept(delivery: Delivery, ...context: Context): Accepted | Answer | Promise<Accepted | Answer> {
    return acceptWith(delivery, context, telemetry && recorder(context));
  }

  // The path up to the handler takes no promise of its own: one for a body still arriving, one
  // for an HMAC that is asynchronous (Web Crypto), one for a dedupe claim, and none otherwise.
  // Every step answers through `refuse`, whether it throws or rejects.
  function acceptWith(
    delivery: Delivery,
    context: Context,
    record: DeliveryTelemetry | undefined,
  ): Accepted | Answer | Promise<Accepted | Answer> {
    let body: Payload | Promise<Payload>;
    try {
      checkRequest(delivery);
      body = delivery.body(limit, bodyTimeout);
    } catch (error) {
      return refuse(error, context, record);
    }
    // Stryker disable next-line ConditionalExpression: equivalent: the shortcut only saves a promise; Promise.resolve takes a body that is no promise as it is.
    if (!isThenable(body)) return verified(body, delivery, context, record);
    return Promise.resolve(body).then(
      (payload) => verified(payload, delivery, context, record),
      (error: unknown) => refuse(error, context, record),
    );
  }

  function verified(
    body: Payload,
    delivery: Delivery,
    context: Context,
    record: DeliveryTelemetry | undefined,
  ): Accepted | Answer | Promise<Accepted | Answer> {
    let event: WebhookEvent | Promise<WebhookEvent>;
    try {
      event = checkedEvent(body, delivery, context, record);
    } catch (error) {
      return refuse(error, context, record);
    }
    if (!isThenable(event)) return claimed(event, context, record);
    return event.then(
      (authentic) => claimed(authentic, context, record),
      (error: unknown) => refuse(error, context, record),
    );
  }

  function claimed(
    event: WebhookEvent,
    context: Context,
    record: DeliveryTelemetry | undefined,
  ): Accepted | Answer | Promise<Accepted | Answer> {
    if (!dedupe) return record ? watched(recorded(event, record, settled), context) : { event, settle: settled };
    return claimId(event, dedupe, context, record);
  }

  async function claimId(
    event: WebhookEvent,
    dedupe: NonNullable<ReturnType<typeof dedupeOptions>>,
    context: Context,
    record: DeliveryTelemetry | undefined,
  ): Promise<Accepted | Answer> {
    const { store, ttl, inFlightTtl, timeout, failOpen } = dedupe;
    const id = event.id;
    let claim: ClaimResult;
    // When the lease began, at the latest: once it has run out, the id may be another delivery's.
    const claimedAt = performance.now();
    try {
      // A claim that lands after we gave up must not block the sender's retry for a lease.
      claim = await withTimeout(store.claim(id, inFlightTtl), timeout, (late) => {
        if (late === "claimed") void quietly(() => store.release(id), timeout, context);
      });
      // Anything else would turn dedupe off without a word: a store that answers it is broken.
      if (claim !== "claimed" && claim !== "in_flight" && claim !== "done") {
        throw new TypeError(
          `flag-webhooks: the dedupe store's claim() answered ${typeof claim === "string" ? JSON.stringify(claim) : String(claim)}, not "claimed", "in_flight" or "done"`,
        );
      }
    } catch (cause) {
      record?.store("claim", since(claimedAt));
      report(cause, context);
      if (failOpen) return record ? watched(recorded(event, record, settled), context) : { event, settle: settled };
      return refuse(
        new WebhookError("store_unavailable", "the dedupe store is unavailable; retry later", { cause }),
        context,
        record,
      );
    }
    record?.store("claim", since(claimedAt));
    if (claim === "done") {
      record?.end("duplicate", 204);
      return duplicate();
    }
    if (claim === "in_flight") {
      return refuse(
        new WebhookError("delivery_in_progress", `event ${id} is being handled by another delivery; retry later`),
        context,
        record,
      );
    }
    const finish = (status: number | undefined): Promise<void> => {
      if (isSuccess(status)) return persist(() => store.complete(id, ttl), timeout, context, record);
      // A failure after the lease ran out releases nothing: the claim has lapsed, and the id
      // may now be held by a copy that arrived meanwhile, whose claim must stand.
      // Stryker disable next-line EqualityOperator: equivalent: a lease ending at the very instant the clock is read ends either now or a moment later.
      if (performance.now() - claimedAt >= inFlightTtl) return settled();
      return quietly(() => store.release(id), timeout, context, record);
    };
    if (record) return watched(recorded(event, record, finish), context);
    let once = false;
    return watched(
      {
        event,
        settle(status) {
          if (once) return settled();
          once = true;
          return finish(status);
        },
      },
      context,
    );
  }

  /** Hands an accepted delivery that settles something to an adapter that watches the wire. */
  function watched(accepted: Accepted, context: Context): Accepted {
    watch?.(accepted, ...context);
    return accepted;
  }

  /**
   * An accepted delivery whose telemetry is on: the handler runs in its context, and settling
   * tells the recorder how long the handler took, what it threw, and the delivery's outcome, once
   * the store has marked or released the id.
   */
  function recorded(
    event: WebhookEvent,
    record: DeliveryTelemetry,
    finish: (status: number | undefined) => Promise<void>,
  ): Accepted {
    const began = performance.now();
    let once = false;
    let thrown: unknown;
    return {
      event,
      run: (handler) => record.run(handler),
      fail(error) {
        thrown = error;
      },
      async settle(status, error = thrown) {
        if (once) return;
        once = true;
        record.handler(since(began), error);
        await finish(status);
        const known = error instanceof WebhookError ? error : undefined;
        if (isSuccess(status)) record.end("handled", status);
        // A handler that threw was answered with its WebhookError's status, or 500.
        else
          record.end(
            known?.code ?? "handler_error",
            status ?? known?.status ?? (error === undefined ? undefined : 500),
          );
      },
    };
  }

  /** The checks made before any byte of the body is read: the method, a signature at all. */
  function checkRequest(delivery: Delivery): void {
    if (delivery.method !== "POST") {
      throw new WebhookError(
        "method_not_allowed",
        delivery.notHttp ?? `method ${delivery.method} not allowed: deliveries are POST`,
      );
    }
    if (isMissing(delivery.signature)) throw missingSignature();
  }

  /** The checks of the body: size, signature (always first), event, replay window. */
  function checkedEvent(
    body: Payload,
    delivery: Delivery,
    context: Context,
    record?: DeliveryTelemetry,
  ): WebhookEvent | Promise<WebhookEvent> {
    // A string body (left by a body parser as rawBody) is measured, and verified, as UTF-8 bytes.
    const payload = typeof body === "string" ? utf8.encode(body) : body;
    if (payload.byteLength > limit) throw payloadTooLarge(limit);
    // Signature first, always: a stale *and* forged delivery is invalid_signature.
    const result = verifiedEvent(secret, payload, delivery.signature);
    return isThenable(result) ? result.then((value) => fresh(value, context, record)) : fresh(result, context, record);
  }

  function fresh({ event, secretIndex }: Verified, context: Context, record?: DeliveryTelemetry): WebhookEvent {
    record?.verified(event, secretIndex);
    if (onVerified) tell(context, () => onVerified(event, { secretIndex }));
    if (maxAge !== undefined) checkAge(event.createdAt, maxAge, clock(now));
    return event;
  }

  async function handle(delivery: Delivery, ...context: Context): Promise<Answer | NativeReply | undefined> {
    const accepted = await acceptWith(delivery, context, telemetry && recorder(context));
    if (!("event" in accepted)) return accepted;
    // An adapter that watches the wire settles with the status it sends (told here only what the
    // handler threw, for telemetry); the others are told here.
    // (A delivery with nothing to settle, no dedupe and no telemetry, takes no closure.)
    const settle =
      watch &&
      // Stryker disable next-line ConditionalExpression: equivalent: with nothing to settle, the closure below also only returns settled().
      accepted.settle !== settled
        ? (_status: number | undefined, error?: unknown) => {
            // Stryker disable next-line ConditionalExpression: equivalent: fail(undefined) records what was already recorded, nothing.
            if (error !== undefined) accepted.fail?.(error);
            return settled();
          }
        : accepted.settle;
    let value: unknown;
    try {
      // Stryker disable OptionalChaining: equivalent: handle() is called only when onEvent was given.
      value = await (accepted.run
        ? accepted.run(() => onEvent?.(accepted.event, ...context))
        : onEvent?.(accepted.event, ...context));
      // Stryker restore OptionalChaining
    } catch (error) {
      await settle(undefined, error);
      // A WebhookError keeps its own answer (a queue hand-off's store_unavailable, say); anything
      // else is reported, and the client gets the generic handler_error: the handler's own
      // message may hold internals (refuse does both).
      return refuse(error, context);
    }
    // The final answer, and so whether the event counts as handled: one the handler gave through
    // the framework stands; else a native result or a reply it returned; else 204. A result that
    // cannot be answered as it is (a status that is no HTTP status, headers Node refuses, a body
    // JSON cannot hold) is a handler failure, never a 2xx that marks the event done.
    try {
      if (answered?.(...context)) return undefined;
      const nativeStatus = native?.(value);
      if (nativeStatus !== undefined) {
        if (!isStatus(nativeStatus)) {
          throw new TypeError("flag-webhooks: onEvent returned a result with no valid HTTP status to answer with");
        }
        await settle(nativeStatus);
        return { native: value };
      }
      const answer = isReply(value) ? replyAnswer(value) : { ...NO_CONTENT, headers: {} };
      await settle(answer.status);
      return answer;
    } catch (error) {
      // Answered 500 below: telemetry is told that status (the store releases the id either way).
      await settle(500);
      report(error, context);
      return errorResponse(undefined);
    }
  }

  /** Runs a store operation whose failure must not change the answer (it is reported instead). */
  async function quietly(
    operation: () => unknown,
    timeout: number,
    context: Context,
    record?: DeliveryTelemetry,
  ): Promise<void> {
    const began = record ? performance.now() : 0;
    try {
      await withTimeout(operation(), timeout);
    } catch (error) {
      report(error, context);
    }
    record?.store("release", since(began));
  }

  /**
   * Marks a handled id done, retrying a failed or slow store within `budget` ms (Redis restarting
   * mid-handler, say): the handler ran, so giving up leaves the id claimed until its lease ends,
   * and a copy delivered after that would run it again. What still fails is reported.
   */
  async function persist(
    operation: () => unknown,
    budget: number,
    context: Context,
    record?: DeliveryTelemetry,
  ): Promise<void> {
    const began = performance.now();
    const deadline = began + budget;
    for (let attempt = 0; ; attempt++) {
      const left = deadline - performance.now();
      try {
        await withTimeout(operation(), Math.max(1, left));
        record?.store("complete", since(began));
        return;
      } catch (error) {
        const pause = Math.min(25 * 2 ** attempt, 250);
        if (deadline - performance.now() <= pause) {
          record?.store("complete", since(began));
          report(error, context);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  async function verify(delivery: Delivery, ...context: Context): Promise<WebhookEvent> {
    try {
      checkRequest(delivery);
      return await checkedEvent(await delivery.body(limit, bodyTimeout), delivery, context);
    } catch (error) {
      if (error instanceof WebhookError && onRejected) tell(context, () => onRejected(error));
      throw error;
    }
  }

  return { accept, verify, handle };
}

function dedupeOptions(dedupe: DedupeOptions, maxAge: number | undefined) {
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
  // A captured copy passes the replay window for up to maxAge plus the skew allowance after it
  // was sent: an id forgotten sooner than that could be replayed and run again.
  // Stryker disable next-line ConditionalExpression: equivalent: without maxAge the sum is NaN, and no ttl is less than NaN.
  if (maxAge !== undefined && ttl < maxAge + CLOCK_SKEW) {
    throw new TypeError(
      `flag-webhooks: option "dedupe.ttl" (${ttl} ms) is shorter than maxAge plus the ${CLOCK_SKEW / 1000} s ` +
        `clock-skew allowance (${maxAge + CLOCK_SKEW} ms): a captured delivery could be replayed after its id ` +
        "is forgotten; make the ttl at least that long",
    );
  }
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

// Stryker disable next-line ArrowFunction: equivalent: every caller awaits or voids it, and awaiting undefined differs only by a microtask.
const settled = (): Promise<void> => Promise.resolve();
/** Seconds since a `performance.now()` reading, as telemetry reports durations. */
const since = (began: number): number => (performance.now() - began) / 1000;
const NO_CONTENT: Answer = { status: 204, headers: {}, body: null, close: false };

/** Whether a handler's final answer means the event was handled: 2xx, and nothing else. */
function isSuccess(status: number | undefined): boolean {
  // Stryker disable next-line ConditionalExpression: equivalent: status is undefined or 200 to 599 here, and undefined is not <= 299; only the upper bound decides.
  return status !== undefined && status >= 200 && status <= 299;
}

/** Reads the clock, failing closed: a clock that names no instant must not turn the window off. */
function clock(now: () => number): number {
  const value = now();
  // Stryker disable next-line ConditionalExpression: equivalent: Number.isFinite is false for anything but a number.
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new TypeError(
      `flag-webhooks: option "now" must return a finite number of ms since the epoch, got ${typeof value === "number" ? value : typeof value}`,
    );
  }
  return value;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    // Stryker disable next-line ConditionalExpression,StringLiteral: equivalent: the values tested here that could be functions are a store's answers, and withTimeout's Promise.resolve adopts a callable thenable either way.
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

function duplicate(): Answer {
  return { status: 204, headers: { [DUPLICATE_HEADER]: "true" }, body: null, close: false };
}

/**
 * A value or promise, bounded in time: past `ms` it rejects, and `late` sees what came too late.
 * Any thenable counts (a Promise of another realm, a library's own), not only native Promises.
 */
function withTimeout<T>(value: T | PromiseLike<T>, ms: number, late?: (value: T) => void): Promise<T> {
  // Stryker disable next-line ConditionalExpression: equivalent: the shortcut only saves a timer; a value that is no thenable resolves at once either way.
  if (!isThenable(value)) return Promise.resolve(value as T);
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      reject(new Error(`the dedupe store did not answer within ${ms} ms`));
    }, ms);
    // Promise.resolve adopts any thenable; its own then may throw, which rejects here too.
    Promise.resolve(value as PromiseLike<T>).then(
      (result) => {
        clearTimeout(timer);
        if (done) late?.(result);
        else resolve(result);
      },
      (error) => {
        clearTimeout(timer);
        // A rejection after the timeout's changes nothing: the promise is settled.
        reject(error);
      },
    );
  });
}

/** A status a reply may carry: a whole number from 200 to 599. */
function isStatus(status: unknown): status is number {
  return Number.isInteger(status) && (status as number) >= 200 && (status as number) <= 599;
}

/**
 * Whether `onEvent` returned a reply: a plain object with a `status`. One whose status is no HTTP
 * status (`"503"`, `600`, `503.5`) throws: it is a mistake, not a 204.
 */
function isReply(value: unknown): value is WebhookReply {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  // Another adapter's answer (a fetch Response, a Lambda result) here would be a 204 the handler
  // did not mean, and a store that decides by its status (PostgresInbox) would disagree with it.
  if (
    // Stryker disable next-line ConditionalExpression: every runtime we support has Response; the check keeps instanceof from throwing where one does not.
    (typeof Response === "function" && value instanceof Response) ||
    (prototype === Object.prototype && "statusCode" in value && !("status" in value))
  ) {
    throw new TypeError(
      "flag-webhooks: onEvent returned a Response or a Lambda result, which this adapter does not answer with; return { status } instead",
    );
  }
  if (!("status" in value) || (prototype !== Object.prototype && prototype !== null)) return false;
  const { status } = value as { status: unknown };
  if (isStatus(status)) return true;
  throw new TypeError(
    `flag-webhooks: onEvent returned a reply whose status ${JSON.stringify(String(status)).slice(0, 40)} is not a whole number from 200 to 599`,
  );
}

/** An HTTP header name (RFC 9110 token), and a value with no line break or NUL. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[\r\n\0]/;

function replyAnswer(reply: WebhookReply): Answer {
  const headers: Record<string, string> = { ...reply.headers };
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name) || BAD_VALUE.test(String(value))) {
      throw new TypeError(
        `flag-webhooks: onEvent returned a reply header ${JSON.stringify(name.slice(0, 40))} that cannot be sent`,
      );
    }
  }
  let body: string | null = null;
  if (typeof reply.body === "string") {
    body = reply.body;
  } else if (reply.body !== undefined && reply.body !== null) {
    body = JSON.stringify(reply.body);
    if (!Object.keys(headers).some((name) => name.toLowerCase() === "content-type")) {
      headers["content-type"] = "application/json; charset=utf-8";
    }
  }
  return { status: reply.status, headers, body, close: false };
}

/**
 * Renders any failure as the response to send. A WebhookError keeps its status and message;
 * anything else is a bug or an application error, answered 500 without its message.
 */
export function errorResponse(error: unknown): Answer {
  const known: WebhookError =
    error instanceof WebhookError ? error : new WebhookError("handler_error", "the webhook handler failed");
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (known.code === "method_not_allowed") headers.allow = "POST";
  const retryAfter = RETRY_AFTER[known.code];
  if (retryAfter) headers["retry-after"] = retryAfter;
  return {
    status: known.status,
    headers,
    body: JSON.stringify(toErrorBody(known)),
    close: CLOSE.has(known.code),
  };
}

/**
 * The default `onError`: one line, so a log collector keeps it whole. The name and message only;
 * an `onError` of your own gets the error itself, stack and cause included.
 */
export function logError(error: unknown): void {
  console.error(`flag-webhooks: ${describeError(error)} (onEvent, a hook or the dedupe store failed)`);
}

/** An error as one line: its name and message, newlines folded. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `thrown value: ${String(error as string)}`;
  // Stryker disable next-line Regex: equivalent: the \s* around [\r\n] take any further line breaks.
  return text.replace(/\s*[\r\n]+\s*/g, " ");
}
