// How a shared store names what it writes: the `scope` convention (one across Redis, Postgres,
// DynamoDB and Durable Objects: it keeps endpoints that share one backend apart), the one rule
// that turns an event id into the id a backend stores, and the token a store's claims carry.

/**
 * Checks a store's `scope` option (the name that keeps endpoints sharing a backend apart: 1 to
 * 100 characters of `A-Z a-z 0-9 . _ -`) when the store is created, with a TypeError naming the
 * option. Every shared store takes it; internal, not exported by the package.
 */
export function checkScope(scope: unknown, owner: string): string {
  if (typeof scope === "string" && /^[\w.-]{1,100}$/.test(scope)) return scope;
  throw new TypeError(`flag-webhooks: option "scope" of ${owner} must be 1-100 characters of A-Z a-z 0-9 . _ -`);
}

/**
 * The longest event id, in bytes of UTF-8, that a store keeps as it is. Half the smallest key
 * limit of the backends: DynamoDB's partition key and a Durable Object's storage key hold 2048
 * bytes, a Postgres btree row about 2700; what a store adds (a scope of up to 100 bytes, a
 * separator, the Durable Object's 20-byte expiry prefix) still fits with room to spare. Redis has
 * no practical limit, but keeps the same rule so that every store names an id alike.
 */
export const MAX_KEPT_ID_BYTES = 1024;

/** What a hashed id starts with; no id kept as it is starts with it. */
const HASHED = "#";
// The short path's test: a leading "#", a NUL, or any surrogate (a pair is well-formed and is
// looked at more closely on the long path; a lone one is not).
const UNUSUAL = /^#|[\0\uD800-\uDFFF]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const encoder = new TextEncoder();

/**
 * The one rule by which every shared store turns an event id into the id it stores (Redis,
 * DynamoDB, Durable Objects, Postgres), so that any id a signed event carries can be deduped on
 * any backend, and two different ids never share a record:
 *
 * - an id is **kept as it is** when it is at most {@link MAX_KEPT_ID_BYTES} (1024) bytes of
 *   UTF-8, holds no U+0000 (Postgres text cannot hold it), is well-formed UTF-16 (a lone
 *   surrogate has no UTF-8 of its own: clients write it as U+FFFD, so two such ids would meet),
 *   and does not start with `#`;
 * - any other id is stored as `#` and the 64 lowercase hex digits of its SHA-256: over its UTF-8
 *   when it is well-formed, else over the byte 0xFF (which no UTF-8 holds) and its UTF-16 code
 *   units, big-endian, so ill-formed ids hash apart from each other and from every other id.
 *
 * A kept id never starts with `#` and a hashed one always does, so an id spelled like the hash of
 * another (`#` and 64 hex digits) is hashed itself and never stands for that other id. Ordinary
 * ids (short, printable) are kept, and cost no hashing: the answer is then a string at once; a
 * hashed id is a promise, as Web Crypto's digest is.
 */
export function storedId(id: string): string | Promise<string> {
  // A UTF-16 unit is at most three bytes of UTF-8: a short id needs no counting.
  // Stryker disable next-line ConditionalExpression,EqualityOperator: a shortcut; the long path answers alike.
  if (id.length <= MAX_KEPT_ID_BYTES / 3 && !UNUSUAL.test(id)) return id;
  const wellFormed = !LONE_SURROGATE.test(id);
  const bytes = wellFormed ? encoder.encode(id) : utf16(id);
  if (wellFormed && !id.startsWith(HASHED) && !id.includes("\0") && bytes.byteLength <= MAX_KEPT_ID_BYTES) return id;
  return sha256Hex(bytes).then((hex) => HASHED + hex);
}

/**
 * The key of an event id under a scope, for the stores that write both in one string (DynamoDB,
 * Durable Objects): `scope#` and the id's {@link storedId}. A scope holds no `#`, so two pairs
 * never meet; a hashed id makes `scope##<sha256>`.
 */
export async function scopedKey(scope: string, id: string): Promise<string> {
  return `${scope}#${await storedId(id)}`;
}

/**
 * A new claim token: the value a store writes into the claims it makes, so that it releases only
 * its own (never a claim another instance took once this one's lease ran out). Unique enough that
 * two stores, in any processes, never draw the same one.
 */
export function claimToken(): string {
  return `claim.${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
}

/** 0xFF, then each UTF-16 code unit as two bytes, big-endian. */
function utf16(id: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(1 + 2 * id.length);
  bytes[0] = 0xff;
  for (let i = 0; i < id.length; i++) {
    const unit = id.charCodeAt(i);
    bytes[1 + 2 * i] = unit >> 8;
    bytes[2 + 2 * i] = unit & 0xff;
  }
  return bytes;
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}
