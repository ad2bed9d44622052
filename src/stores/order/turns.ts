// Waiting for a flag another delivery holds, on a store several instances share (Redis,
// DynamoDB): none of them can be told by the backend when a hold ends without a connection or a
// stream of its own (a blocking read would stall the user's client for every other command). So a
// hold ended in this process wakes the deliveries of this process that wait for its flag at once,
// and while this process holds the flag they send nothing until then (or its lease runs out); a
// hold of another instance is looked at again after a pause that doubles from 10 ms to 250 ms and
// never outlasts what is left of its lease: a few requests per second per waiting delivery, not a
// hundred.

const FIRST_PAUSE = 10;
const LONGEST_PAUSE = 250;

/** What one attempt to hold a flag found: the hold, or that the flag is held (for `left` ms more, when the backend said). */
export type Attempt<T> = { hold: T } | { left: number | undefined };

/** The deliveries of this process waiting for a flag, woken when a hold of it ends here. */
export class Turns {
  readonly #waiting = new Map<string, Set<() => void>>();
  /** The flags a delivery of this process holds now, and how many (two, after a lease was taken over). */
  readonly #held = new Map<string, number>();

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
      if ("hold" in found) {
        this.taken(flag);
        return found.hold;
      }
      if (turn.woken()) continue;
      const left = Math.max(1, found.left ?? LONGEST_PAUSE);
      // Held here: its end wakes this delivery, so only a lease that runs out needs a look.
      const here = this.#held.has(flag) && found.left !== undefined;
      await this.#watch(flag).wait(here ? left : Math.min(FIRST_PAUSE * 2 ** tries, LONGEST_PAUSE, left));
    }
  }

  /** A delivery of this process took `flag` (by {@link take}, or in a dedupe claim's request). */
  taken(flag: string): void {
    this.#held.set(flag, (this.#held.get(flag) ?? 0) + 1);
  }

  /** A hold of `flag` taken here ended (once per hold): the deliveries waiting for it try again now. */
  ended(flag: string): void {
    const held = (this.#held.get(flag) ?? 1) - 1;
    if (held > 0) this.#held.set(flag, held);
    else this.#held.delete(flag);
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
