import { WebhookError } from "../errors.js";

/**
 * How far in the future a `createdAt` may lie before the event is refused: the sender's and the
 * receiver's clocks are never exactly equal. Small on purpose (issue 8): a generous allowance
 * would let a captured delivery with a forged-looking future date live that much longer.
 */
export const CLOCK_SKEW = 60_000;

const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/i;

/**
 * The longest delay a timer can wait: Node (and browsers) store it in a signed 32-bit integer and
 * fire a longer one after 1 ms instead, so a timeout of `"30d"` would expire at once.
 */
export const TIMER_MAX = 2 ** 31 - 1;

/**
 * A duration in milliseconds from a number of milliseconds or a string such as `"90s"`, `"5m"`,
 * `"1h"` or `"7d"`, at most `max` ms (pass {@link TIMER_MAX} for a duration a timer waits).
 * Throws a TypeError naming the option for anything else, when a receiver is created rather than
 * on its first request.
 */
export function parseDuration(value: number | string, option: string, max = Number.MAX_SAFE_INTEGER): number {
  let ms = Number.NaN;
  if (typeof value === "number") {
    ms = value;
  } else {
    const match = typeof value === "string" && DURATION.exec(value.trim());
    if (match) ms = Number(match[1]) * UNITS[(match[2] ?? "ms").toLowerCase() as keyof typeof UNITS];
  }
  if (!(Number.isFinite(ms) && ms > 0)) {
    throw new TypeError(
      `flag-webhooks: option "${option}" must be a positive number of milliseconds or a duration such as "5m", got ${JSON.stringify(value)}`,
    );
  }
  if (ms > max) {
    throw new TypeError(
      `flag-webhooks: option "${option}" must be at most ${max} ms${max === TIMER_MAX ? " (about 24.8 days, the longest a timer can wait)" : ""}, got ${JSON.stringify(value)}`,
    );
  }
  return ms;
}

/**
 * The replay window: refuses an event older than `maxAge`, or dated more than {@link CLOCK_SKEW}
 * ahead of `now`, with `event_expired`; a `createdAt` that names no instant is `invalid_payload`.
 * Both sides are checked: a past-only check lets a future-dated copy replay for ever.
 */
export function checkAge(createdAt: string, maxAge: number, now: number): void {
  if (!Number.isFinite(now)) {
    // A clock that names no instant must not turn the window off: every comparison with NaN is false.
    throw new TypeError(`flag-webhooks: the clock ("now") must return a finite number of ms, got ${now}`);
  }
  const at = Date.parse(createdAt);
  // Stryker disable next-line ConditionalExpression,StringLiteral: unreachable through the API: every caller passes a createdAt the event parser accepted (isUtcInstant), which Date.parse always reads
  if (Number.isNaN(at)) throw new WebhookError("invalid_payload", "createdAt is not a valid instant");
  if (now - at > maxAge) {
    throw new WebhookError("event_expired", `event is older than the replay window of ${maxAge} ms`);
  }
  if (at - now > CLOCK_SKEW) {
    throw new WebhookError("event_expired", `event is dated more than ${CLOCK_SKEW} ms in the future`);
  }
}
