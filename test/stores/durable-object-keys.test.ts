import { createHash, randomUUID } from "node:crypto";
import fc from "fast-check";
import { type DedupeNamespace, DurableObjectDedupeStore } from "flag-webhooks/cloudflare";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportWorkerdCoverage, startWorker } from "../support/cloudflare-bundle.js";
import { fnv1a, referenceStoredId, sha256 } from "../support/key-rules.js";

// The key under which DurableObjectDedupeStore keeps an event id, in workerd (miniflare): the
// store runs inside a Worker (test/fixtures/cloudflare/keys-worker.ts), so the rule and its SHA-256
// run on the runtime's own Web Crypto, over the real DedupeObject. An id is kept as it is up to
// 1024 bytes of UTF-8; a longer one, or one with NUL, a lone surrogate or a leading "#", is
// `#<sha256>`; the record is `id:<scope>#<stored id>` in object `<scope>:<FNV-1a of the key % shards>`.

let mf: Miniflare;
let dedupe: DedupeNamespace;
beforeAll(async () => {
  mf = await startWorker(
    "test/fixtures/cloudflare/keys-worker.ts",
    { durableObjects: { DEDUPE: "TestDedupeObject" } },
    { stryker: true },
  );
  dedupe = await mf.getDurableObjectNamespace("DEDUPE");
}, 60_000);
afterAll(async () => {
  await reportWorkerdCoverage(async () => (await mf.dispatchFetch("http://keys/__stryker_coverage")).json());
  await mf?.dispose();
});

/** Calls the store inside the Worker for each id in turn; answers each call's result. */
async function inWorker(scope: string, op: "claim" | "complete", ids: string[], shards = 4): Promise<unknown[]> {
  const response = await mf.dispatchFetch("http://keys/store", {
    method: "POST",
    // JSON.stringify writes a lone surrogate as an escape, so every id arrives as it was sent.
    body: JSON.stringify({ scope, shards, op, ids, ms: 60_000 }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as unknown[];
}

/** Every key stored in the objects of `scope`, with the shard that holds it: `<shard>|<key>`. */
async function storedKeys(scope: string, shards = 4): Promise<string[]> {
  const keys: string[] = [];
  for (let shard = 0; shard < shards; shard++) {
    const stub = dedupe.get(dedupe.idFromName(`${scope}:${shard}`) as never) as unknown as {
      fetch(url: string): Promise<Response>;
    };
    const held = (await (await stub.fetch("https://object/__keys")).json()) as string[];
    keys.push(...held.map((key) => `${shard}|${key}`));
  }
  return keys;
}

/** Where the record of `id` lives: `<shard>|id:<scope>#<stored id>`. */
const recordOf = (scope: string, id: string, shards = 4) => {
  const key = `${scope}#${referenceStoredId(id)}`;
  return `${fnv1a(key) % shards}|id:${key}`;
};
const records = async (scope: string) => (await storedKeys(scope)).filter((key) => key.includes("|id:")).sort();
const newScope = () => `keys-${randomUUID().slice(0, 8)}`;

describe("DurableObjectDedupeStore in workerd: the key of an event id", () => {
  it("an ordinary id keeps the key it had: id:<scope>#<id>, in the shard of its FNV-1a", async () => {
    const scope = newScope();
    const ids = ["evt_01J9Z3", `evt_${randomUUID()}`, "a#b", "é".repeat(20)];
    expect(await inWorker(scope, "claim", ids)).toEqual(ids.map(() => "claimed"));
    expect(await records(scope)).toEqual(ids.map((id) => `${fnv1a(`${scope}#${id}`) % 4}|id:${scope}#${id}`).sort());
  });

  it("a long id keeps the key it had: <scope>## and the SHA-256 of its UTF-8", async () => {
    const scope = newScope();
    const id = `evt_${"é".repeat(3000)}`;
    expect(await inWorker(scope, "claim", [id])).toEqual(["claimed"]);
    const key = `${scope}##${createHash("sha256").update(id, "utf8").digest("hex")}`;
    expect(await records(scope)).toEqual([`${fnv1a(key) % 4}|id:${key}`]);
  });

  it("the bound is the id's own 1024 bytes, whatever the scope: kept at 1024, hashed at 1025", async () => {
    for (const scope of [`k${randomUUID().slice(0, 4)}`, `${"s".repeat(92)}${randomUUID().slice(0, 8)}`]) {
      const ids = ["a".repeat(1024), "é".repeat(512), "b".repeat(1025), "è".repeat(513)];
      expect(await inWorker(scope, "claim", ids)).toEqual(["claimed", "claimed", "claimed", "claimed"]);
      expect(await records(scope)).toEqual(ids.map((id) => recordOf(scope, id)).sort());
      expect(referenceStoredId("a".repeat(1024))).toBe("a".repeat(1024));
      expect(referenceStoredId("b".repeat(1025))).toMatch(/^#[0-9a-f]{64}$/);
    }
  });

  it("an id spelled as a long id's hashed key is an id of its own: both claimed, under two keys", async () => {
    const scope = newScope();
    const long = `evt_${randomUUID()}${"x".repeat(2000)}`;
    const spelled = `#${sha256(Buffer.from(long, "utf8"))}`;
    expect(await inWorker(scope, "claim", [long, spelled])).toEqual(["claimed", "claimed"]);
    expect(await records(scope)).toEqual(
      [
        recordOf(scope, long),
        `${fnv1a(`${scope}##${sha256(Buffer.from(spelled, "utf8"))}`) % 4}|id:${scope}##${sha256(Buffer.from(spelled, "utf8"))}`,
      ].sort(),
    );
    expect(await inWorker(scope, "claim", [spelled, long])).toEqual(["in_flight", "in_flight"]);
  });

  it("ids with NUL or a lone surrogate are hashed apart, each claimed once", async () => {
    const scope = newScope();
    const base = `evt_${randomUUID()}`;
    const ids = [base, `${base}\0`, `${base}\0x`, `${base}\ud800`, `${base}\udbff`, `${base}\udc00`, `${base}\ufffd`];
    expect(await inWorker(scope, "claim", ids)).toEqual(ids.map(() => "claimed"));
    expect(await inWorker(scope, "claim", ids)).toEqual(ids.map(() => "in_flight"));
    expect(await records(scope)).toEqual(ids.map((id) => recordOf(scope, id)).sort());
  });

  // Each run makes a new object in workerd, which takes seconds on a busy machine: its own timeout.
  it("any ids, under the longest scope: each claimed once under its own key, every storage key within 2048 bytes, and the same key from Node", async () => {
    const unit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code));
    const nearBound = fc
      .tuple(
        fc.constantFrom("a", "é", "€", "😀"),
        fc.integer({ min: 900, max: 1100 }),
        fc.constantFrom("", "#", "\0", "\ud800"),
      )
      .map(([char, count, tail]) => char.repeat(Math.ceil(count / Buffer.byteLength(char))) + tail);
    const plain = fc.oneof(fc.string({ unit, maxLength: 30 }), fc.string({ unit: "binary", maxLength: 40 }), nearBound);
    const anyId = fc.oneof(
      plain,
      plain.map((other) => `#${sha256(Buffer.from(other, "utf8"))}`),
    );
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(anyId, { minLength: 1, maxLength: 6 }), async (ids) => {
        const scope = `${"s".repeat(92)}${randomUUID().slice(0, 8)}`;
        // One shard: one object to list per run.
        expect(await inWorker(scope, "claim", ids, 1)).toEqual(ids.map(() => "claimed"));
        const keys = await storedKeys(scope, 1);
        expect(keys.filter((key) => key.includes("|id:")).sort()).toEqual(
          ids.map((id) => recordOf(scope, id, 1)).sort(),
        );
        for (const key of keys)
          expect(Buffer.byteLength(key.slice(key.indexOf("|") + 1), "utf8")).toBeLessThanOrEqual(2048);
        // A store in Node over the same namespace names each id alike: every id is in flight there.
        const node = new DurableObjectDedupeStore(dedupe, { scope, shards: 1 });
        for (const id of ids) expect(await node.claim(id, 60_000)).toBe("in_flight");
      }),
      { numRuns: 10 },
    );
    // About 5 s on a quiet machine; a CI run under a load of 14 took past 90 s.
  }, 240_000);
});
