// Waiting for a flag another delivery holds, on a store several instances share (Redis,
// DynamoDB): none of them can be told by the backend when a hold ends without a connection or a
// stream of its own, which the store does not own. So a hold ended in this process wakes the
// deliveries of this process that wait for its flag at once, and a hold of another instance is
// looked at again after a pause that doubles from 10 ms to 250 ms and never outlasts what is left
// of its lease: a few requests per second per waiting delivery, not a hundred.

const FIRST_PAUSE = 10;
const LONGEST_PAUSE = 250;

/** What one attempt to hold a flag found: the hold, or that the flag is held (for `left` ms more, when the backend said). */
export type Attempt<T> = { hold: T } | { left: number | undefined };

/** The deliveries of this process waiting for a flag, woken when a hold of it ends here. */
export class Turns {
  readonly #waiting = new Map<string, Set<() => void>>();

  /** Tries `attempt` until it holds `flag`, waiting between tries as the file's comment says. */
  async take<T>(flag: string, attempt: () => Promise<Attempt<T>>): Promise<T> {
    for (let tries = 0; ; tries++) {
      // Watched from before the attempt: a hold that ends while the attempt is on its way wakes it.
      const turn = this.#watch(flag);
      let found: Attempt<T>;
      try {
        found = await attempt();
      } finally {
        turn.stop();
      }
      if ("hold" in found) return found.hold;
      if (turn.woken()) continue;
      const pause = Math.min(FIRST_PAUSE * 2 ** tries, LONGEST_PAUSE, Math.max(1, found.left ?? LONGEST_PAUSE));
      await this.#watch(flag).wait(pause);
    }
  }

  /** A hold of `flag` ended in this process: the deliveries waiting for it try again now. */
  wake(flag: string): void {
    const waiting = this.#waiting.get(flag);
    if (!waiting) return;
    this.#waiting.delete(flag);
    for (const wake of waiting) wake();
  }

  /** Watches for the end of a hold of `flag` here: until stopped, or for `ms` ms of waiting. */
  #watch(flag: string) {
    let woken = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let resolve: (() => void) | undefined;
    const stop = () => {
      clearTimeout(timer);
      const waiting = this.#waiting.get(flag);
      waiting?.delete(wake);
      if (waiting?.size === 0) this.#waiting.delete(flag);
    };
    const wake = () => {
      woken = true;
      stop();
      resolve?.();
    };
    let waiting = this.#waiting.get(flag);
    if (!waiting) {
      waiting = new Set();
      this.#waiting.set(flag, waiting);
    }
    waiting.add(wake);
    return {
      stop,
      woken: () => woken,
      wait: (ms: number) =>
        new Promise<void>((done) => {
          resolve = done;
          timer = setTimeout(wake, ms);
          (timer as { unref?: () => void }).unref?.();
        }),
    };
  }
}
