/** The default body limit: 1 MiB. */
export const DEFAULT_LIMIT = 1024 * 1024;

const UNITS = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };
const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i;

/**
 * A body limit as a number of bytes: a non-negative integer, or a string such as `"512kb"` or
 * `"1.5mb"` (1 kb = 1024 bytes, as in raw-body and body-parser). Throws a TypeError for anything
 * else, when a middleware is created rather than on its first request.
 */
export function parseLimit(limit: number | string | undefined): number {
  if (limit === undefined) return DEFAULT_LIMIT;
  if (Number.isSafeInteger(limit) && (limit as number) >= 0) return limit as number;
  const match = typeof limit === "string" && SIZE.exec(limit.trim());
  if (match) {
    const unit = (match[2] ?? "b").toLowerCase() as keyof typeof UNITS;
    return Math.floor(Number(match[1]) * UNITS[unit]);
  }
  throw new TypeError(
    `flag-webhooks: option "limit" must be a non-negative whole number of bytes or a size such as "512kb", got ${JSON.stringify(limit)}`,
  );
}
