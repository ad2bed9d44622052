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
 * A duration in milliseconds from a number of milliseconds or a string such as `"90s"`, `"5m"`,
 * `"1h"` or `"7d"`. Throws a TypeError naming the option for anything else, when a receiver is
 * created rather than on its first request.
 */
export function parseDuration(value: number | string, option: string): number {
  if (typeof value === "number" && Number.isFinite(value) && value > 0) return value;
  const match = typeof value === "string" && DURATION.exec(value.trim());
  if (match) {
    const ms = Number(match[1]) * UNITS[(match[2] ?? "ms").toLowerCase() as keyof typeof UNITS];
    if (ms > 0) return ms;
  }
  throw new TypeError(
    `flag-webhooks: option "${option}" must be a positive number of milliseconds or a duration such as "5m", got ${JSON.stringify(value)}`,
  );
}

/**
 * The replay window: refuses an event older than `maxAge`, or dated more than {@link CLOCK_SKEW}
 * ahead of `now`, with `event_expired`; a `createdAt` that names no instant is `invalid_payload`.
 * Both sides are checked: a past-only check lets a future-dated copy replay for ever.
 */
export function checkAge(createdAt: string, maxAge: number, now: number): void {
  const at = Date.parse(createdAt);
  if (Number.isNaN(at)) throw new WebhookError("invalid_payload", "createdAt is not a valid instant");
  if (now - at > maxAge) {
    throw new WebhookError("event_expired", `event is older than the replay window of ${maxAge} ms`);
  }
  if (at - now > CLOCK_SKEW) {
    throw new WebhookError("event_expired", `event is dated more than ${CLOCK_SKEW} ms in the future`);
  }
}
