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
