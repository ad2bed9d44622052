import { createHash, randomUUID } from "node:crypto";
import fc from "fast-check";
import { RedisDedupeStore } from "flag-webhooks";
import { DynamoDBDedupeStore } from "flag-webhooks/dynamodb";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_KEPT_ID_BYTES, storedId } from "../../src/store-contract/keys.js";
import { type Dynalite, startDynalite, stopDynalite } from "../support/dynalite.js";
import { referenceStoredId, sha256 } from "../support/key-rules.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// The one rule by which every shared store turns an event id into the id it stores: kept as it is
// when it is at most 1024 bytes of UTF-8, well-formed, free of NUL and not starting with "#";
// otherwise "#" and its SHA-256. Checked against a reference written here from the rule's words,
// then seen in what the real stores write: DynamoDB (dynalite) and Redis (redis-server). The
// Durable Object store: test/stores/durable-object-keys.test.ts; every store, any id handled once:
// the store contract (test/support/store-contract.ts).

const utf8 = (text: string) => Buffer.byteLength(text, "utf8");

// Ids of every kind: any UTF-16 units (NUL, "#", lone surrogates included), any code points, ids
// around the 1024-byte bound in one-, two-, three- and four-byte characters, and ids spelled as
// the hashed form of another id.
const unit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code));
const anyUnits = fc.string({ unit, maxLength: 40 });
const nearBound = fc
  .tuple(
    fc.constantFrom("a", "é", "€", "😀"),
    fc.integer({ min: 240, max: 1100 }),
    fc.constantFrom("", "#", "\0", "\ud800"),
  )
  .map(([char, count, tail]) => char.repeat(Math.ceil(count / utf8(char))) + tail);
const ordinary = fc.string({ unit: "binary", maxLength: 60 });
const plain = fc.oneof(anyUnits, ordinary, nearBound);
const hashLike = plain.map((other) => `#${sha256(Buffer.from(other, "utf8"))}`);
const anyId = fc.oneof(plain, hashLike, fc.constantFrom("", "#", "\0", "\ud800", "\udc00", "\ud800\udc00"));

describe("the rule: which ids are kept, and the form of the others", () => {
  it("matches the rule as written, for any id", async () => {
    await fc.assert(
      fc.asyncProperty(anyId, async (id) => {
        expect(await storedId(id)).toBe(referenceStoredId(id));
      }),
      { numRuns: 2000 },
    );
  });

  it("keeps an ordinary id at once, as it is (no hashing, no promise); 1024 bytes of UTF-8 is the bound", async () => {
    expect(MAX_KEPT_ID_BYTES).toBe(1024);
    for (const id of [
      "evt_01J9Z3",
      "a".repeat(1024),
      "é".repeat(512),
      `${"€".repeat(341)}a`,
      "😀".repeat(256),
      "a#b",
    ]) {
      expect(storedId(id)).toBe(id);
    }
    // Bytes count, not characters: 400 ASCII characters are kept, though 400 × 3 is over the bound.
    expect(storedId("c".repeat(400))).toBe("c".repeat(400));
  });

  it("hashes an id a byte over the bound, with NUL, with a lone surrogate, or starting with #", async () => {
    const hashed = /^#[0-9a-f]{64}$/;
    for (const id of [
      "a".repeat(1025),
      "é".repeat(513),
      `${"😀".repeat(256)}a`,
      "evt\0",
      "\0",
      "#",
      "#evt",
      "evt\ud800",
      "\udc00evt",
    ]) {
      const stored = storedId(id);
      expect(stored, JSON.stringify(id.slice(0, 12))).toBeInstanceOf(Promise);
      expect(await stored).toMatch(hashed);
    }
  });

  it("hashes a well-formed id's UTF-8, as the DynamoDB and Durable Object stores did: their long ids keep their keys", async () => {
    const id = `evt_${"é".repeat(3000)}`;
    expect(await storedId(id)).toBe(`#${createHash("sha256").update(id, "utf8").digest("hex")}`);
  });

  it("never meets: a kept id never starts with #, a hashed one always does, and different ids stay different", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(anyId, { minLength: 2, maxLength: 12 }), async (ids) => {
        const stored = await Promise.all(ids.map((id) => storedId(id)));
        expect(new Set(stored).size).toBe(ids.length);
        ids.forEach((id, i) => {
          expect((stored[i] as string).startsWith("#")).toBe(stored[i] !== id);
        });
      }),
      { numRuns: 500 },
    );
  });

  it("an id spelled as another id's hashed form is hashed itself, never that other id's key", async () => {
    await fc.assert(
      fc.asyncProperty(plain, async (other) => {
        const spelled = `#${sha256(Buffer.from(other, "utf8"))}`;
        expect(await storedId(spelled)).not.toBe(await storedId(other));
        expect(await storedId(spelled)).toBe(`#${sha256(Buffer.from(spelled, "utf8"))}`);
      }),
    );
  });

  it("ids that UTF-8 writes alike (lone surrogates, U+FFFD) get stored ids of their own", async () => {
    const ids = ["e\ud800", "e\udbff", "e\udc00", "e\ufffd", "e\ud800\udc00", "e\udc00\ud800"];
    const stored = await Promise.all(ids.map((id) => storedId(id)));
    expect(new Set(stored).size).toBe(ids.length);
  });

  it("what every store writes fits its backend, for the longest scope and any id", async () => {
    const scope = "s".repeat(100);
    await fc.assert(
      fc.asyncProperty(anyId, async (id) => {
        const stored = await storedId(id);
        expect(utf8(stored)).toBeLessThanOrEqual(1024);
        // Storable as text anywhere: no NUL (Postgres), well-formed (UTF-8 has it exactly).
        expect(stored).not.toContain("\0");
        expect((stored as unknown as { isWellFormed(): boolean }).isWellFormed()).toBe(true);
        // DynamoDB: the partition key `scope#id`, at most 2048 bytes.
        expect(utf8(`${scope}#${stored}`)).toBeLessThanOrEqual(2048);
        // Durable Objects: storage keys `id:scope#id` and `exp:<15 digits>:id:scope#id`, at most 2048 bytes.
        expect(utf8(`exp:${"0".repeat(15)}:id:${scope}#${stored}`)).toBeLessThanOrEqual(2048);
        // Postgres: the primary key (scope, id) in one btree row, at most 2704 bytes with its headers.
        expect(utf8(scope) + utf8(stored) + 32).toBeLessThanOrEqual(2704);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("DynamoDBDedupeStore writes scope# and the stored id (dynalite)", () => {
  let db: Dynalite;
  beforeAll(async () => {
    db = await startDynalite();
  });
  afterAll(() => stopDynalite(db));

  /** Claims `id` in a new scope and answers every key the store wrote there. */
  async function keysOf(id: string, scope = `k-${randomUUID().slice(0, 8)}`): Promise<string[]> {
    const store = new DynamoDBDedupeStore(db.client(), { table: db.table, scope });
    expect(await store.claim(id, 60_000)).toBe("claimed");
    return (await db.items(`${scope}#`)).map((item) => (item.pk as { S: string }).S);
  }

  it("an ordinary id keeps the key it had: scope#id", async () => {
    expect(await keysOf("evt_01J9Z3", "keep")).toEqual(["keep#evt_01J9Z3"]);
  });

  it("a long id keeps the key it had: scope## and the SHA-256 of its UTF-8", async () => {
    const id = `evt_${"é".repeat(3000)}`;
    expect(await keysOf(id, "long")).toEqual([`long##${createHash("sha256").update(id).digest("hex")}`]);
  });

  it("the bound is the id's own 1024 bytes, whatever the scope: kept at 1024, hashed at 1025", async () => {
    for (const scope of ["k", "s".repeat(100)]) {
      const cases = [
        ["a".repeat(1024), `${scope}#${"a".repeat(1024)}`],
        ["é".repeat(512), `${scope}#${"é".repeat(512)}`],
        // Bytes count, not the worst case of three per character.
        ["c".repeat(400), `${scope}#${"c".repeat(400)}`],
        ["b".repeat(1025), `${scope}##${sha256(Buffer.from("b".repeat(1025)))}`],
        ["è".repeat(513), `${scope}##${sha256(Buffer.from("è".repeat(513)))}`],
      ];
      const store = new DynamoDBDedupeStore(db.client(), { table: db.table, scope });
      for (const [id, key] of cases as [string, string][]) {
        expect(await store.claim(id, 60_000)).toBe("claimed");
        expect(await db.item(key), `${id.length} × ${id[0]} under a scope of ${scope.length}`).toBeDefined();
      }
    }
  });

  it("an id spelled like a hashed key has a key of its own: both are claimed", async () => {
    const scope = "spelled";
    const store = new DynamoDBDedupeStore(db.client(), { table: db.table, scope });
    const long = `evt_${randomUUID()}${"x".repeat(2000)}`;
    const spelled = `#${sha256(Buffer.from(long))}`;
    expect(await store.claim(long, 60_000)).toBe("claimed");
    expect(await store.claim(spelled, 60_000)).toBe("claimed");
    expect(await db.item(`${scope}#${spelled}`)).toBeDefined();
    expect(await db.item(`${scope}##${sha256(Buffer.from(spelled))}`)).toBeDefined();
  });

  it("any id, under the longest scope: claimed under scope# and its stored id, the one key written", async () => {
    await fc.assert(
      fc.asyncProperty(anyId, async (id) => {
        const scope = `${"s".repeat(92)}${randomUUID().slice(0, 8)}`;
        expect(await keysOf(id, scope)).toEqual([`${scope}#${referenceStoredId(id)}`]);
      }),
      { numRuns: 60 },
    );
  });
});

const redis = redisAvailability();
describe.skipIf(!redis.available)(
  `RedisDedupeStore writes <prefix><scope>: and the stored id (redis-server)${redis.available ? "" : ` (skipped: ${redis.reason})`}`,
  () => {
    let server: RedisServer | undefined;
    let client: Redis;
    beforeAll(async () => {
      server = await startRedis();
      client = new Redis(server.url);
    });
    afterAll(async () => {
      client?.disconnect();
      await stopRedis(server);
    });

    /** Claims `id` in a new scope and answers every key the store wrote there. */
    async function keysOf(id: string): Promise<string[]> {
      const scope = `k-${randomUUID().slice(0, 8)}`;
      const store = new RedisDedupeStore(client, { prefix: "keys:", scope });
      expect(await store.claim(id, 60_000)).toBe("claimed");
      return (await client.keys(`keys:${scope}:*`)).map((key) => key.slice(`keys:${scope}:`.length));
    }

    it("an ordinary id keeps the key it had, up to 1024 bytes: <prefix><scope>:<id>", async () => {
      for (const id of ["evt_01J9Z3", "a".repeat(1024), "é".repeat(512), "a#b"]) expect(await keysOf(id)).toEqual([id]);
    });

    it("a long id, one with NUL or a lone surrogate, or one starting with # is stored as # and its SHA-256", async () => {
      for (const id of ["a".repeat(1025), `evt_${"é".repeat(3000)}`, "evt\0x", "evt\ud800", "#evt"]) {
        expect(await keysOf(id), JSON.stringify(id.slice(0, 12))).toEqual([referenceStoredId(id)]);
        expect(referenceStoredId(id)).toMatch(/^#[0-9a-f]{64}$/);
      }
    });

    it("any id: claimed under <prefix><scope>: and its stored id, the one key written", async () => {
      await fc.assert(
        fc.asyncProperty(anyId, async (id) => {
          expect(await keysOf(id)).toEqual([referenceStoredId(id)]);
        }),
        { numRuns: 100 },
      );
    });
  },
);
