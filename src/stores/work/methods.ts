// The keep-then-work methods of an inbox, written once for PostgresInbox and SqliteInbox (each
// extends this and hands it its Keep when it is made), so both offer the same calls with the same
// documentation.
import type { WebhookEvent } from "../../events.js";
import type { Keep } from "./keep.js";
import type {
  EnqueueOptions,
  InboxCounts,
  InboxWorker,
  KeptEvent,
  KeptHandler,
  PurgeTarget,
  ReplayTarget,
  WorkOptions,
} from "./types.js";

/** Keep-then-work: an inbox that keeps each verified event before its 2xx, and runs it in a worker. */
export abstract class KeepingInbox<Tx> {
  #keep: Keep | undefined;

  /** Hands this inbox its keep-then-work, once, when it is made. */
  protected keepWith(keep: Keep): void {
    this.#keep = keep;
  }

  get #kept(): Keep {
    if (!this.#keep) {
      throw new TypeError(
        "flag-webhooks: keep-then-work needs a transaction held open while the handler runs, which D1 and a Durable Object's storage do not have: hand events to Cloudflare Queues instead (enqueueTo from flag-webhooks/cloudflare)",
      );
    }
    return this.#keep;
  }

  /**
   * An `onEvent` that keeps each event (its raw body as verified, id, type, createdAt, the time)
   * and commits it before the answer: `202` once it is kept, and a worker (`work()`) runs it. A
   * copy of an event already there (pending, running, parked or done) is a duplicate `204`; the
   * database unable to take it answers `503 store_unavailable` with `Retry-After`. With `run`,
   * the handler also runs at once, in the request, as the worker's first attempt: `204` when it
   * is done, `202` when it failed (the event is kept: the worker retries it on the schedule).
   *
   * @example
   * ```ts
   * app.post("/webhooks", webhookMiddleware({ secret, maxAge: "5m", onEvent: inbox.enqueue() }));
   * ```
   */
  enqueue(options?: EnqueueOptions<Tx>): (event: WebhookEvent, ...context: unknown[]) => Promise<unknown> {
    return this.#kept.enqueue(options);
  }

  /**
   * A worker that runs `fn(event, tx, { attempt, signal })` on each due event, with `fn`'s writes
   * through `tx` committed with the event's "done" mark: its effects happen once. An attempt that
   * throws, or passes `deadline`, is recorded (`lastError`, `attempts`) and tried again after the
   * next delay of `retries`; after the last, the event is parked. `close()` waits for the
   * attempts that run.
   *
   * @example
   * ```ts
   * const worker = inbox.work(router, { retries: ["10s", "1m", "1h"] });
   * process.on("SIGTERM", () => void worker.close());
   * ```
   */
  work(fn: KeptHandler<Tx>, options?: WorkOptions): InboxWorker {
    return this.#kept.work(fn, options);
  }

  /** The kept events waiting for an attempt or running one, oldest first (at most `limit`, default 100). */
  pending(options: { limit?: number } = {}): Promise<KeptEvent[]> {
    return this.#kept.list("pending", options.limit);
  }

  /** The parked events (their attempts spent, or their body refused), oldest first (at most `limit`, default 100). */
  parked(options: { limit?: number } = {}): Promise<KeptEvent[]> {
    return this.#kept.list("parked", options.limit);
  }

  /** One event of this inbox's scope by its id, in any state, or undefined. */
  kept(eventId: string): Promise<KeptEvent | undefined> {
    return this.#kept.kept(eventId);
  }

  /** How many kept events this inbox's scope holds pending, running and parked, and since when the oldest waits. */
  counts(): Promise<InboxCounts> {
    return this.#kept.counts();
  }

  /**
   * Makes a parked (or pending) event due now with a full schedule of attempts, or every such
   * event kept since an instant; resolves with how many. A done event is never run again.
   *
   * @example
   * ```ts
   * await inbox.replay({ since: new Date(Date.now() - 24 * 3600_000) });
   * ```
   */
  replay(target: ReplayTarget): Promise<number> {
    return this.#kept.replay(target);
  }

  /**
   * Deletes one event by its id, or every event in one state (kept before `before`); resolves with
   * how many. A done event within the inbox's `retention` is not deleted but emptied: its body (and
   * last error) dropped, its id kept as done until `prune()` removes it past the retention, so a
   * copy arriving meanwhile is still a duplicate and its effects do not happen twice; `kept()` shows
   * it done with a `null` body. Safe while workers run: an event deleted under an attempt is not
   * marked done, and its handler's writes roll back.
   */
  purge(target: PurgeTarget): Promise<number> {
    return this.#kept.purge(target);
  }
}
