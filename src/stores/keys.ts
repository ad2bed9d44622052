// The `scope` of a shared dedupe store (one convention across Redis, Postgres, DynamoDB
// and Durable Objects): it keeps endpoints that share one backend apart.

/**
 * Checks a store's `scope` option (the name that keeps endpoints sharing a backend apart: 1 to
 * 100 characters of `A-Z a-z 0-9 . _ -`) when the store is created, with a TypeError naming the
 * option. Every shared store takes it; internal, not exported by the package.
 */
export function checkScope(scope: unknown, owner: string): string {
  if (typeof scope === "string" && /^[\w.-]{1,100}$/.test(scope)) return scope;
  throw new TypeError(`flag-webhooks: option "scope" of ${owner} must be 1-100 characters of A-Z a-z 0-9 . _ -`);
}

const encoder = new TextEncoder();

/**
 * The key of an event id under a scope: `scope#id`, the id as it is while the key stays within
 * `maxBytes` of UTF-8 (a scope holds no `#`, so two pairs never meet); past it, `scope##` and the
 * id's SHA-256 in hex, so an id of any length fits a backend's key limit.
 */
export async function scopedKey(scope: string, id: string, maxBytes: number): Promise<string> {
  const key = `${scope}#${id}`;
  // A UTF-8 byte is at least a UTF-16 unit, at most three: measure only when it could be too long.
  // Stryker disable next-line all: a shortcut; the exact count below gives every key the same answer.
  if (key.length * 3 <= maxBytes) return key;
  if (encoder.encode(key).byteLength <= maxBytes) return key;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(id)));
  return `${scope}##${Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
