import { createHash } from "node:crypto";
import { DynamoDBDedupeStore } from "flag-webhooks/dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "./support/dynalite.js";

// The key a shared store writes for an event id under its scope (src/delivery/scope.ts), seen in
// DynamoDB (dynalite) where a key holds at most 1024 bytes: `scope#id` while it fits, counted in
// UTF-8 bytes, not characters; past that `scope##` and the id's SHA-256, so any id can be deduped.

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

const SCOPE = "k";
const hashed = (id: string) => `${SCOPE}##${createHash("sha256").update(id, "utf8").digest("hex")}`;

/** Claims `id` and answers the key the store wrote it under. */
async function keyOf(id: string): Promise<string> {
  const store = new DynamoDBDedupeStore(db.client(), { table: db.table, scope: SCOPE });
  expect(await store.claim(id, 60_000)).toBe("claimed");
  const verbatim = await db.item(`${SCOPE}#${id}`);
  if (verbatim) return `${SCOPE}#${id}`;
  expect(await db.item(hashed(id))).toBeDefined();
  return hashed(id);
}

describe("the key of an event id under a scope", () => {
  it("keeps an ASCII id whose key is 1024 bytes as it is, and hashes one a byte longer", async () => {
    const fits = "a".repeat(1024 - SCOPE.length - 1);
    expect(await keyOf(fits)).toBe(`${SCOPE}#${fits}`);
    const over = "b".repeat(1024 - SCOPE.length);
    expect(await keyOf(over)).toBe(hashed(over));
  });

  it("keeps an id of 400 ASCII characters as it is: bytes count, not the worst case of 3 per character", async () => {
    const id = "c".repeat(400);
    expect(await keyOf(id)).toBe(`${SCOPE}#${id}`);
  });

  it("measures a non-ASCII id in UTF-8 bytes: 511 two-byte characters fit, 512 do not", async () => {
    // "k#" is 2 bytes; each "é" is 2 bytes: 2 + 1022 = 1024 fits, 2 + 1024 does not.
    const fits = "é".repeat(511);
    expect(await keyOf(fits)).toBe(`${SCOPE}#${fits}`);
    const over = "è".repeat(512);
    expect(await keyOf(over)).toBe(hashed(over));
  });

  it("dedupes a hashed id like any other: a second claim is in_flight, another long id is free", async () => {
    const store = new DynamoDBDedupeStore(db.client(), { table: db.table, scope: SCOPE });
    const id = "d".repeat(5000);
    expect(await store.claim(id, 60_000)).toBe("claimed");
    expect(await store.claim(id, 60_000)).toBe("in_flight");
    expect(await store.claim(`${id}e`, 60_000)).toBe("claimed");
  });
});
