// The hook tracing and metrics plug into: types only, so the core stays free of any
// telemetry package. `flag-webhooks/otel` implements it with OpenTelemetry; a receiver without
// the `telemetry` option never calls any of it.
import type { WebhookEvent } from "./events.js";

/** A dedupe store operation, as {@link DeliveryTelemetry.store} is told of it. */
export type StoreOperation = "claim" | "complete" | "release";

/**
 * What a receiver reports about its deliveries: the `telemetry` option of every adapter.
 * `openTelemetry()` from `flag-webhooks/otel` is one; any object of this shape is another.
 *
 * @example
 * ```ts
 * import type { Telemetry } from "flag-webhooks";
 *
 * const counts = new Map<string, number>();
 * const telemetry: Telemetry = {
 *   delivery: () => ({
 *     verified() {},
 *     store() {},
 *     run: (handler) => handler(),
 *     handler() {},
 *     end: (outcome) => void counts.set(outcome, (counts.get(outcome) ?? 0) + 1),
 *   }),
 * };
 * ```
 */
export interface Telemetry {
  /**
   * Begins recording one delivery, when its request reaches the receiver (in the request's
   * context); `undefined` when there is nothing to record (no SDK), and the receiver then works
   * as it does without telemetry.
   */
  delivery(): DeliveryTelemetry | undefined;
}

/**
 * The record of one delivery. Calls come in this order, each at most once but `store`: `verified`
 * (an authentic delivery), `store` (each dedupe operation), `run` (the handler), `handler` (it
 * finished), then always `end`, last. None of them is ever given a secret, a signature or a body.
 */
export interface DeliveryTelemetry {
  /** The delivery is authentic: its event, and the index of the secret that verified it. */
  verified(event: WebhookEvent, secretIndex: number): void;
  /** A dedupe store operation ended (or failed, or timed out) after `seconds`. */
  store(operation: StoreOperation, seconds: number): void;
  /** Runs the handler (`onEvent`, or the routes after the middleware) inside this delivery's context. */
  run<T>(handler: () => T): T;
  /** The handler finished after `seconds`; `error` is what it threw, if it threw. */
  handler(seconds: number, error?: unknown): void;
  /**
   * The delivery is over: `outcome` is `"handled"` (the handler finished with a 2xx answer),
   * `"duplicate"`, `"stale"` (with `order`: every change older than one already applied, handled
   * without the handler), or the error code answered (`invalid_signature`, `handler_error`…);
   * `status` is the HTTP status answered, when known.
   */
  end(outcome: string, status: number | undefined): void;
}

/**
 * What carries a trace across a queue: the `telemetry` option of `enqueueTo` and `processEvents`
 * (`flag-webhooks/bullmq`). `openTelemetry()` from `flag-webhooks/otel` is one.
 *
 * @example
 * ```ts
 * import type { QueueTelemetry } from "flag-webhooks";
 *
 * // Carries nothing, and runs each job as it is.
 * const none: QueueTelemetry = { inject: () => ({}), process: (_carrier, _job, handler) => handler() };
 * ```
 */
export interface QueueTelemetry {
  /** The active trace context as text fields to store with a job (W3C `traceparent`, `tracestate`). */
  inject(): Record<string, string>;
  /**
   * Runs a job's handler inside a span that continues the trace `carrier` came from (none: a new
   * trace), told the event and the attempt (1 for the first run, 2 for the first retry…).
   */
  process<T>(
    carrier: Record<string, string> | undefined,
    job: { event: WebhookEvent; id: string | undefined; attempt: number },
    handler: () => Promise<T>,
  ): Promise<T>;
}

/** How one attempt of a kept event ended, as {@link InboxTelemetry.attempt} is told. */
export interface KeptAttemptResult {
  /**
   * `done` (its writes committed with the done mark), `failed` (to be tried again on the
   * schedule), `parked` (no attempt left, or its body no longer parses), or `lost` (another worker
   * took it after this one's lease lapsed, or it was purged: nothing ran).
   */
  outcome: "done" | "failed" | "parked" | "lost";
  /** What made it fail, when known: the handler's exception, the deadline passed, the body refused. */
  error?: unknown;
}

/**
 * What carries a trace into a keep-then-work inbox and reports its worker's attempts: the
 * `telemetry` option of `inbox.enqueue()` and `inbox.work()` (`flag-webhooks/postgres`,
 * `/sqlite`). `openTelemetry()` from `flag-webhooks/otel` is one.
 *
 * @example
 * ```ts
 * import type { InboxTelemetry } from "flag-webhooks";
 *
 * const outcomes = new Map<string, number>();
 * const telemetry: InboxTelemetry = {
 *   inject: () => ({}),
 *   async attempt(_carrier, _kept, run) {
 *     const result = await run();
 *     outcomes.set(result.outcome, (outcomes.get(result.outcome) ?? 0) + 1);
 *     return result;
 *   },
 * };
 * ```
 */
export interface InboxTelemetry {
  /** The active trace context as text fields to keep with the event (W3C `traceparent`, `tracestate`). */
  inject(): Record<string, string>;
  /**
   * Runs one attempt of a kept event, inside a span that continues the trace `carrier` came from
   * (the delivery that brought the event; none: a new trace), told the event (undefined when its
   * body no longer parses), its stored id and the attempt (1 for the first); resolves with what
   * `run` resolves with, and reports its outcome.
   */
  attempt(
    carrier: Record<string, string> | undefined,
    kept: { event: WebhookEvent | undefined; id: string; attempt: number },
    run: () => Promise<KeptAttemptResult>,
  ): Promise<KeptAttemptResult>;
}
