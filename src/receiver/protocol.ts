// The adapter protocol: what an adapter hands the receiver about one request, and what it gets
// back. An adapter only translates (a request in; what happened and the answer out); every
// decision, the status of every refusal and whether a delivery counts as handled, is the
// receiver's. docs/architecture.md walks through it for people who write an adapter.
import type { WebhookEvent } from "../events.js";
import type { Payload } from "../payload.js";

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

/**
 * A verified, fresh, claimed delivery whose handler the adapter runs (its `next()`), telling the
 * receiver how it went. The receiver decides once both are known, the handler finished and its
 * final answer: a 2xx marks the event handled (and, for a store that holds the handler's
 * effects, commits them), anything else releases it so the sender's retry runs it again.
 */
export interface Accepted {
  event: WebhookEvent;
  /** Runs the handler inside the delivery's trace context when telemetry is on; else just runs it. */
  run<T>(handler: () => T): T;
  /** The handler finished: with what it threw, if it threw. The first call counts. */
  finished(error?: unknown): void;
  /**
   * The final answer's status, or `undefined` when there is none (the answer was cut, or will
   * never be written). The first call counts. Gives, once the handler has also finished and
   * the store has recorded or released the event, the answer to write instead of this one
   * (a 2xx whose store could not record it, or a 2xx from a handler that then threw), or
   * `undefined` to write the answer as it is: at once, without a promise, when the decision waited
   * for nothing (the handler had finished, and no store had anything to wait for), so that such
   * an answer need not be held. A promise never rejects.
   */
  answered(status: number | undefined): Answer | undefined | Promise<Answer | undefined>;
  /**
   * Whether a 2xx answer must wait for `answered` before it leaves: the delivery holds a claim,
   * or a store that holds the handler's effects. Asked when the answer's status is known.
   */
  holdsAnswer(): boolean;
  /**
   * The client closed the connection before any answer began, and the handler (a route that
   * answers through the framework) may never answer: the delivery's telemetry record ends now,
   * with the outcome `client_closed`. Its claim still waits for the handler, or its lease.
   */
  clientClosed(): void;
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
   * For adapters whose answer goes out on a Node `ServerResponse`: watches it for the delivery,
   * holding a 2xx until `accepted.answered` resolves and telling the receiver the status actually
   * sent, whoever writes it (the core, the handler, the framework's error handler) and whenever.
   * Called before the handler runs, for a delivery that has something to settle (a claim, an
   * inbox's own `onEvent`, a telemetry record); otherwise when an inbox that `onEvent` calls (a
   * router's handler) first enlists. False when the answer had already ended then (the handler
   * wrote it before that inbox enlisted, with nothing to hold it): it cannot wait for the store.
   */
  watch?(accepted: Accepted, ...context: Context): boolean;
}

/** A value `onEvent` returned that the adapter answers with itself (a fetch `Response`). */
export interface NativeReply {
  native: unknown;
}

/**
 * The one decision-maker behind every adapter. `Handled` is what `handle` resolves with: an
 * adapter that answers what it is given (fetch, Lambda) always gets an answer; one that watches
 * its answer on the wire may get `undefined`, when `onEvent` answered through the framework.
 */
export interface Receiver<Context extends unknown[], Handled = Answer | NativeReply | undefined> {
  /** Checks a request up to the handler: the event to hand on, or the answer to send now. */
  accept(delivery: Delivery, ...context: Context): Accepted | Answer | Promise<Accepted | Answer>;
  /**
   * Verifies a request and checks its age, throwing what `accept` would answer: for adapters that
   * hand the event to the caller (`verifyRequest`). Runs the hooks; no dedupe.
   */
  verify(delivery: Delivery, ...context: Context): Promise<WebhookEvent>;
  /**
   * Accepts a request and runs `onEvent`. An adapter that watches the wire gets the answer to
   * write (`undefined` when `onEvent` answered through the framework) and the watcher settles;
   * any other gets the final answer, already settled: the one to write, or a native reply.
   */
  handle(delivery: Delivery, ...context: Context): Promise<Handled>;
}

/** The hooks of an adapter that answers with what the receiver gives it: no `answered`, no `watch`. */
export interface ReturnHooks {
  native?(value: unknown): number | undefined;
  answered?: undefined;
  watch?: undefined;
}
