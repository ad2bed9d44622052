// Taking over a DynamoDB hold whose holder died: when a waiting instance may, on its own clock.

/** How many holds an instance watches at most: one per flag its deliveries wait for. */
const WATCHED_MAX = 10_000;

/**
 * The holds of other deliveries this instance has found on flags it waits for, each with when it
 * was first seen on this instance's clock. Instances' clocks differ, so a lease's end written by
 * the holder's clock cannot be compared with the waiter's: as AWS's DynamoDB Lock Client does, a
 * waiter takes a hold over only once it has seen the same hold (its token) unchanged for the whole
 * lease on its own clock. Kept per store instance, so a delivery that gave up (503) and is retried
 * does not start the count again; a hold that changed hands starts it again.
 */
export class Watched {
  readonly #seen = new Map<string, { token: string; lease: number; since: number }>();

  /** Notes that `token` holds `pk`; answers how long, in ms, before this instance may take it over. */
  see(pk: string, token: string, lease: number, now: number): number {
    let seen = this.#seen.get(pk);
    if (seen?.token !== token) {
      seen = { token, lease, since: now };
      this.#seen.delete(pk);
      if (this.#seen.size >= WATCHED_MAX) this.#seen.delete(this.#seen.keys().next().value as string);
      this.#seen.set(pk, seen);
    }
    return Math.max(0, seen.since + seen.lease - now);
  }

  /** The hold of `pk` this instance has seen unchanged for its whole lease, if any: the one it may take over. */
  lapsed(pk: string, now: number): string | undefined {
    const seen = this.#seen.get(pk);
    return seen !== undefined && now - seen.since >= seen.lease ? seen.token : undefined;
  }

  /** This instance took `pk`: whatever it watched there is gone. */
  forget(pk: string): void {
    this.#seen.delete(pk);
  }
}
