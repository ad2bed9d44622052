import { WebhookError } from "../errors.js";

/**
 * How far in the future a `createdAt` may lie before the event is refused: the sender's and the
 * receiver's clocks are never exactly equal. Small on purpose: a generous allowance would let a
 * captured delivery with a forged-looking future date live that much longer.
 */
export const CLOCK_SKEW = 60_000;

/**
 * The replay window: refuses an event older than `maxAge`, or dated more than {@link CLOCK_SKEW}
 * ahead of `now`, with `event_expired` (a `createdAt` that named no instant would be refused too).
 * Both sides are checked: a past-only check lets a future-dated copy replay for ever.
 */
export function checkAge(createdAt: string, maxAge: number, now: number): void {
  if (!Number.isFinite(now)) {
    // A clock that names no instant must not turn the window off: every comparison with NaN is false.
    throw new TypeError(`flag-webhooks: the clock ("now") must return a finite number of ms, got ${now}`);
  }
  // Every caller passes a createdAt the event parser accepted, which Date.parse always reads. Were
  // one NaN, every comparison with it would be false: each check is written to refuse it then.
  const at = Date.parse(createdAt);
  if (!(now - at <= maxAge)) {
    throw new WebhookError("event_expired", `event is older than the replay window of ${maxAge} ms`);
  }
  if (!(at - now <= CLOCK_SKEW)) {
    throw new WebhookError("event_expired", `event is dated more than ${CLOCK_SKEW} ms in the future`);
  }
}

/**
 * Checks that handled ids are remembered long enough for the replay window to close behind them:
 * at least `maxAge` plus twice {@link CLOCK_SKEW}. A copy passes the window until `maxAge` after
 * its `createdAt` on the receiver's clock, `createdAt` may lie up to one allowance ahead of the
 * receiver that handled it, and another receiver's clock may run up to one allowance behind that
 * one's: an id forgotten sooner could be replayed and run again. Throws a TypeError naming
 * `what` (an option) when a receiver or store is made.
 */
export function checkRetention(retention: number, maxAge: number | undefined, what: string): void {
  if (maxAge === undefined) return;
  const least = maxAge + 2 * CLOCK_SKEW;
  if (retention >= least) return;
  throw new TypeError(
    `flag-webhooks: ${what} (${retention} ms) is shorter than maxAge plus twice the ${CLOCK_SKEW / 1000} s ` +
      `clock-skew allowance (${least} ms): a captured delivery could be replayed after its id is forgotten, ` +
      "by a receiver whose clock is behind the one that handled it; make it at least that long",
  );
}
