// The worker loop: take due events, run their attempts, look again after `interval` when none is
// due; close() stops taking and waits for the attempts that run.
import { type Ground, type Plan, take } from "./attempt.js";
import { tracedAttempt } from "./traced.js";
import type { InboxWorker, KeptHandler } from "./types.js";

/** The loop's settings, checked by the inbox. */
export interface Loop {
  interval: number | false;
  concurrency: number;
  onError: (error: unknown) => void;
}

/** A worker over one inbox (see {@link InboxWorker}). */
export class Worker<Tx> implements InboxWorker {
  #closed = false;
  #wake: (() => void) | undefined;
  readonly #running = new Set<Promise<unknown>>();
  readonly #loop: Promise<void> | undefined;

  constructor(
    private readonly ground: Ground,
    private readonly plan: Plan,
    private readonly fn: KeptHandler<Tx>,
    private readonly loop: Loop,
  ) {
    if (loop.interval !== false) this.#loop = this.#run(loop.interval);
  }

  async drain(): Promise<number> {
    let count = 0;
    while (!this.#closed) {
      // No more than the database runs at once: an event taken counts an attempt, which must not be
      // spent waiting for a connection another of this worker's attempts holds.
      const taken = await take(this.ground, this.plan, Math.min(this.loop.concurrency, this.ground.db.capacity));
      if (taken.length === 0) return count;
      // Each runs, or, parked by the take (its last attempt never ended), is told to telemetry.
      const attempts = taken.map((event) => this.#track(tracedAttempt(this.ground, this.plan, event, this.fn)));
      count += taken.filter((event) => event.state === "running").length;
      await Promise.all(attempts);
    }
    return count;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#wake?.();
    await this.#loop;
    await Promise.allSettled([...this.#running]);
  }

  /** Keeps `work` among the running attempts until it ends, so close() waits for it. */
  #track<T>(work: Promise<T>): Promise<T> {
    this.#running.add(work);
    const forget = () => void this.#running.delete(work);
    work.then(forget, forget);
    return work;
  }

  async #run(interval: number): Promise<void> {
    while (!this.#closed) {
      try {
        await this.drain();
      } catch (error) {
        try {
          this.loop.onError(error);
        } catch {
          // The worker keeps working whatever its error listener does.
        }
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, interval);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }
}
