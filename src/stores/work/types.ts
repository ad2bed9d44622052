// The types users meet in keep-then-work, shared by PostgresInbox and SqliteInbox: what the
// worker runs, its options, what the inbox shows of a kept event, and what replay and purge take.
import type { WebhookEvent } from "../../events.js";
import type { InboxTelemetry } from "../../telemetry.js";
import type { InboxState } from "./states.js";

export type { InboxState } from "./states.js";

/** What the worker tells the handler of one attempt, as its third argument. */
export interface AttemptInfo {
  /** This attempt's number: 1 for the first. */
  attempt: number;
  /** Aborted when the attempt's `deadline` passes or the worker is closed: stop, and let it fail. */
  signal: AbortSignal;
}

/**
 * What `work(fn)` runs: the event, the transaction its "done" mark commits in (as `handle()`'s
 * `tx`), and the attempt. A `createRouter()` router whose handlers take `(event, tx)` is one.
 */
export type KeptHandler<Tx> = (event: WebhookEvent, tx: Tx, attempt: AttemptInfo) => unknown;

/** The retry schedule and the attempt's bounds: options of `work()` and of `enqueue({ run })`. */
export interface KeepOptions {
  /**
   * The delays before attempts 2, 3…, in ms or as durations; after the last, a failing event is
   * parked. Default `["10s", "1m", "5m", "30m", "2h", "6h", "12h", "24h", "24h"]`: 10 attempts
   * over about 2.9 days (docs/inbox-worker.md: why).
   */
  retries?: readonly (number | string)[];
  /** Each delay is drawn within ± this fraction of it, so failures at once do not retry at once. Default `0.1`. */
  jitter?: number;
  /** The source of the jitter, for tests. Default `Math.random`. */
  random?: () => number;
  /**
   * How long one attempt's handler may run, from when its transaction has begun, before it counts as
   * failed (its signal aborts); the wait for a free connection before that is bounded as long. Default `"1m"`.
   */
  deadline?: number | string;
  /**
   * How long a taken event is the taker's: past it, another worker may take it (the one that took
   * it stopped). Longer than `deadline`. Default `"5m"`.
   */
  lease?: number | string;
  /**
   * Traces and metrics (`openTelemetry()` from `flag-webhooks/otel`): `enqueue()` keeps the
   * delivery's trace context with each event, and each attempt is a span in that trace, its
   * outcome counted (done, failed, parked).
   */
  telemetry?: InboxTelemetry;
}

/** Options of `work()`. */
export interface WorkOptions extends KeepOptions {
  /** How often an idle worker looks for due events, in ms or as a duration; `false`: never (call `drain()`). Default `"1s"`. */
  interval?: number | string | false;
  /**
   * How many events one worker runs at once, at most as many as the inbox holds transactions at
   * once (a pg Pool's `max` less one, postgres.js's `max`; SQLite runs one at a time). Default `1`.
   */
  concurrency?: number;
  /** Told of the worker's own failures (the database unreachable); the worker goes on. Default: `console.error`. */
  onError?: (error: unknown) => void;
}

/** Options of `enqueue()`. */
export interface EnqueueOptions<Tx> extends KeepOptions {
  /**
   * Inline first, kept on failure: once the event is kept, run this handler at once, in the
   * request, as the worker would (its first attempt). Done: `204`; failed: `202`, and a worker
   * retries it on the schedule. Without it, the answer is `202` and a worker runs it.
   */
  run?: KeptHandler<Tx>;
  /**
   * Group commit: deliveries that arrive while the inbox is committing others wait for that COMMIT
   * to end, then are kept together, in one statement and one COMMIT (at most this many at once;
   * default 64), each still answered only once its own row is committed. A delivery that finds no
   * COMMIT in flight is committed at once: nothing waits on a timer. `false`: one COMMIT per
   * delivery, as many at once as the database takes.
   */
  groupCommit?: number | false;
}

/** A worker started by `work()`. */
export interface InboxWorker {
  /** Runs every due event now, until none is left; resolves with how many attempts it ran. */
  drain(): Promise<number>;
  /** Stops taking events and resolves once the running attempts have ended. */
  close(): Promise<void>;
}

/** A kept event, as `pending()`, `parked()` and `kept()` show it. */
export interface KeptEvent {
  /** The event id as stored (a very long or unusual id is stored as `#` and its SHA-256). */
  id: string;
  state: InboxState;
  /** The event's type, as received (`null` for a row `handle()` wrote). */
  type: string | null;
  /** The event's `createdAt`, as received. */
  createdAt: string | null;
  /** When the inbox kept it, in ms since the epoch. */
  receivedAt: number | null;
  /** Attempts made so far. */
  attempts: number;
  /** When the next attempt is due, in ms since the epoch; `null` when none is. */
  nextAttemptAt: number | null;
  /** Why the last attempt failed, or why it was parked. */
  lastError: string | null;
  /** The body as received (the bytes whose signature was verified, as UTF-8 text). */
  body: string | null;
}

/** How many kept events an inbox holds in each state, as `counts()` answers. */
export interface InboxCounts {
  /** Waiting for their next attempt. */
  pending: number;
  /** Taken by a worker, under a lease. */
  running: number;
  /** Their attempts spent (or their body refused): kept until replayed or purged. */
  parked: number;
  /** When the oldest pending or running event was received, in ms since the epoch; `null` when none is. */
  oldestWaitingSince: number | null;
}

/** What `replay()` takes: one event id, or every parked (and pending) event kept since an instant. */
export type ReplayTarget = string | { since: Date | number };

/** What `purge()` takes: one event id, or the events in one state, optionally kept before an instant. */
export type PurgeTarget = string | { state: "parked" | "pending" | "done"; before?: Date | number };
