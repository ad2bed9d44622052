import { createHash } from "node:crypto";

// The stores' key rules restated from their documented words, for the tests that hold src/ to
// them (test/store-contract/keys.test.ts, durable-object.test.ts, durable-object-keys.test.ts): one
// restatement, so that those tests cannot come to disagree on what the rule is.

/** The SHA-256 of `bytes`, in lowercase hex. */
export const sha256 = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");

/**
 * The id a shared store keeps for event id `id`, by the rule's words: `id` as it is when it is
 * well-formed (String.prototype.isWellFormed: no lone surrogate), holds no NUL, does not start
 * with "#" and is at most 1024 bytes of UTF-8; otherwise "#" and the SHA-256 of its UTF-8 (of a
 * 0xFF byte and its JSON, when it is not well-formed).
 */
export function referenceStoredId(id: string): string {
  const wellFormed = (id as unknown as { isWellFormed(): boolean }).isWellFormed();
  if (wellFormed && !id.startsWith("#") && !id.includes("\0") && Buffer.byteLength(id, "utf8") <= 1024) return id;
  const bytes = wellFormed
    ? Buffer.from(id, "utf8")
    : Buffer.concat([Buffer.from([0xff]), Buffer.from(JSON.stringify(id), "utf8")]);
  return `#${sha256(bytes)}`;
}

/** FNV-1a, 32 bits, over UTF-16 code units: the placement the Durable Object store's `shards` option documents. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}
