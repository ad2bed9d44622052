// When a kept event is tried again after a failure, and when it is parked: the one backoff rule
// both inboxes (Postgres and SQLite) follow. docs/inbox-worker.md justifies the default.
import { parseDuration } from "../../util/duration.js";

/**
 * The default delays before attempts 2 to 10: about 2.9 days in all, close to Stripe's 3 days of
 * retries and past Svix's ~27 h, so a handler broken on a Friday evening and fixed on Monday
 * morning still gets its events; the first retries come soon (10 s, 1 min, 5 min) for a
 * downstream blip or a deploy. Graphile Worker (25 attempts, exp(min(n, 10)) s, ~3 days) and
 * River (25 attempts, n⁴ s, ~3 weeks) take more attempts over a similar or longer span.
 */
export const DEFAULT_RETRIES: readonly string[] = ["10s", "1m", "5m", "30m", "2h", "6h", "12h", "24h", "24h"];

/** The default jitter: each delay is drawn within ±10 % of its value. */
export const DEFAULT_JITTER = 0.1;

/** A retry schedule, checked: the delays in ms before attempts 2, 3…, and the jitter fraction. */
export interface Schedule {
  readonly delays: readonly number[];
  readonly jitter: number;
  readonly random: () => number;
}

/** Options that make a {@link Schedule}: see `KeepOptions.retries` and `jitter`. */
export interface ScheduleOptions {
  retries?: readonly (number | string)[];
  jitter?: number;
  random?: () => number;
}

/** The schedule of `options`; a TypeError naming the option for anything invalid. */
export function scheduleOf(options: ScheduleOptions = {}): Schedule {
  const retries = options.retries ?? DEFAULT_RETRIES;
  if (!Array.isArray(retries)) {
    throw new TypeError('flag-webhooks: option "retries" must be an array of delays, such as ["10s", "1m", "1h"]');
  }
  const delays = retries.map((delay, index) => parseDuration(delay, `retries[${index}]`));
  const jitter = options.jitter ?? DEFAULT_JITTER;
  if (typeof jitter !== "number" || !(jitter >= 0 && jitter < 1)) {
    throw new TypeError('flag-webhooks: option "jitter" must be a fraction from 0 to less than 1, such as 0.1');
  }
  const random = options.random ?? Math.random;
  if (typeof random !== "function") throw new TypeError('flag-webhooks: option "random" must be a function');
  return { delays, jitter, random };
}

/** How many attempts an event gets in all: the first, and one per delay. */
export function attemptsOf(schedule: Schedule): number {
  return schedule.delays.length + 1;
}

/**
 * When the attempt after failed attempt `attempt` (1 for the first) is due, in ms since the
 * epoch, from `now`; undefined when that was the last one: the event is then parked.
 */
export function nextAttemptAt(schedule: Schedule, attempt: number, now: number): number | undefined {
  const delay = schedule.delays[attempt - 1];
  if (delay === undefined) return undefined;
  const spread = schedule.jitter === 0 ? 1 : 1 + (schedule.random() * 2 - 1) * schedule.jitter;
  return now + Math.round(delay * spread);
}
