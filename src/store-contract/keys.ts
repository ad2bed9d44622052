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

// What makes an id hashed whatever its length: a leading "#" (the hashed form's mark), a NUL, or a
// lone surrogate (with the u flag a surrogate pair is one code point, outside \p{Cs}).
const UNUSUAL = /^#|\0|\p{Cs}/u;
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
 *   when it is well-formed, else over the byte 0xFF (which no UTF-8 holds) and the UTF-8 of its
 *   JSON (which writes each lone surrogate as an escape), so ill-formed ids hash apart from each
 *   other and from every other id.
 *
 * A kept id never starts with `#` and a hashed one always does, so an id spelled like the hash of
 * another (`#` and 64 hex digits) is hashed itself and never stands for that other id. Ordinary
 * ids (short, printable) are kept, and cost no hashing: the answer is then a string at once; a
 * hashed id is a promise, as Web Crypto's digest is.
 */
export function storedId(id: string): string | Promise<string> {
  const usual = !UNUSUAL.test(id);
  // A UTF-16 unit is at most three bytes of UTF-8: a short id needs no counting.
  if (usual && (id.length * 3 <= MAX_KEPT_ID_BYTES || encoder.encode(id).byteLength <= MAX_KEPT_ID_BYTES)) return id;
  const bytes = /\p{Cs}/u.test(id) ? new Uint8Array([0xff, ...encoder.encode(JSON.stringify(id))]) : encoder.encode(id);
  return crypto.subtle
    .digest("SHA-256", bytes)
    .then((digest) => `#${Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("")}`);
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
