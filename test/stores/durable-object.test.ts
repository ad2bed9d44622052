import { createHash, randomUUID } from "node:crypto";
import type { ClaimResult, DedupeStore } from "flag-webhooks";
import { type DedupeNamespace, DurableObjectDedupeStore } from "flag-webhooks/cloudflare";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportWorkerdCoverage, startWorker } from "../support/cloudflare-bundle.js";
import { fnv1a } from "../support/key-rules.js";
import { describeStoreContract } from "../support/store-contract.js";

// DurableObjectDedupeStore and DedupeObject. The store from src/, run in Node (so Stryker can
// switch its mutants), over REAL Durable Object namespaces: miniflare's getDurableObjectNamespace()
// proxies each request to the objects running in workerd (test/fixtures/cloudflare/objects.ts):
// the real DedupeObject, and an odd one that answers what a DedupeObject never does. Then the
// same store inside the Worker, driven over a route. Under Stryker the mutant it switches on here
// is switched on in workerd too (strykerMutantBanner), so the cases that run there measure the
// Durable Object's code. The Worker that receives into a Queue: test/queues/cloudflare.test.ts.

let mf: Miniflare;
let dedupe: DedupeNamespace;
let odd: DedupeNamespace;
beforeAll(async () => {
  mf = await startWorker(
    "test/fixtures/cloudflare/objects.ts",
    { durableObjects: { DEDUPE: "TestDedupeObject", ODD: "OddObject" } },
    { stryker: true },
  );
  // The binding's proxy, typed by miniflare as the runtime's DurableObjectNamespace: assigned
  // here without a cast, so it is a DedupeNamespace (get(id).fetch(url, { method, body })).
  dedupe = await mf.getDurableObjectNamespace("DEDUPE");
  odd = await mf.getDurableObjectNamespace("ODD");
}, 60_000);
afterAll(async () => {
  await reportWorkerdCoverage(async () => (await mf.dispatchFetch("http://objects/__stryker_coverage")).json());
  await mf?.dispose();
});

/** The keys stored in the object named `name` of the DEDUPE namespace. */
async function keysOf(name: string): Promise<string[]> {
  const stub = dedupe.get(dedupe.idFromName(name) as never) as unknown as {
    fetch(url: string): Promise<Response>;
  };
  return (await (await stub.fetch("https://object/__keys")).json()) as string[];
}

/** Where each record of `keys` is stored: the objects, of `shards` objects of `scope`, that hold it. */
async function holders(scope: string, shards: number, keys: string[]): Promise<number[][]> {
  // One object after the other: 16 reads at once through miniflare's proxy failed ("fetch failed")
  // on a loaded machine, and the order of the reads does not matter here.
  const stored: string[][] = [];
  for (let shard = 0; shard < shards; shard++) stored.push(await keysOf(`${scope}:${shard}`));
  return keys.map((key) => stored.flatMap((held, shard) => (held.includes(`id:${key}`) ? [shard] : [])));
}
const holder = async (scope: string, shards: number, key: string) => (await holders(scope, shards, [key]))[0];

const newId = () => `evt_${randomUUID()}`;

describeStoreContract(
  "DurableObjectDedupeStore in Node over a real namespace (miniflare)",
  {
    shared: true,
    scoped: true,
    async make() {
      return {
        store: new DurableObjectDedupeStore(dedupe, { scope: "node", shards: 4 }),
        peer: new DurableObjectDedupeStore(dedupe, { scope: "node", shards: 4 }),
        otherScope: new DurableObjectDedupeStore(dedupe, { scope: "node-other", shards: 4 }),
      };
    },
  },
  (subject) => {
    it("keeps each id in the one object <scope>:<FNV-1a of scope#id modulo shards>", async () => {
      const { store } = subject();
      const ids = Array.from({ length: 12 }, newId);
      for (const id of ids) expect(await store.claim(id, 10_000)).toBe("claimed");
      const expected = ids.map((id) => [fnv1a(`node#${id}`) % 4]);
      expect(
        await holders(
          "node",
          4,
          ids.map((id) => `node#${id}`),
        ),
      ).toEqual(expected);
      // Spread over the shards, not all in one object.
      expect(new Set(expected.flat()).size).toBeGreaterThan(1);
    });

    it("the same id in the two scopes lives in each scope's own objects", async () => {
      const { store, otherScope } = subject();
      const id = newId();
      expect(await store.claim(id, 10_000)).toBe("claimed");
      expect(await otherScope?.claim(id, 10_000)).toBe("claimed");
      expect(await holder("node", 4, `node#${id}`)).toEqual([fnv1a(`node#${id}`) % 4]);
      expect(await holder("node-other", 4, `node-other#${id}`)).toEqual([fnv1a(`node-other#${id}`) % 4]);
    });

    it("release by another store of the scope leaves the claim alone; the claimer's own release frees it", async () => {
      const { store, peer } = subject();
      const id = newId();
      expect(await store.claim(id, 10_000)).toBe("claimed");
      await peer?.release(id);
      expect(await peer?.claim(id, 10_000)).toBe("in_flight");
      await store.release(id);
      expect(await peer?.claim(id, 10_000)).toBe("claimed");
    });

    it("an id too long for a storage key is kept under scope## and its SHA-256, and deduped", async () => {
      const { store, peer } = subject();
      const id = `evt_${"é".repeat(600)}${randomUUID()}`;
      expect(await store.claim(id, 10_000)).toBe("claimed");
      expect(await peer?.claim(id, 10_000)).toBe("in_flight");
      expect(await peer?.claim(`${id}x`, 10_000)).toBe("claimed");
      const key = `node##${createHash("sha256").update(id).digest("hex")}`;
      expect(await holder("node", 4, key)).toEqual([fnv1a(key) % 4]);
      // An id just within the limit keeps its own key.
      const fits = "x".repeat(1024 - "node#".length);
      expect(await store.claim(fits, 10_000)).toBe("claimed");
      expect(await holder("node", 4, `node#${fits}`)).toEqual([fnv1a(`node#${fits}`) % 4]);
    });
  },
);

// The same store inside a Worker, as an app runs it, driven over a route of the Worker
// (test/fixtures/cloudflare/objects.ts): each call is one request to workerd.
async function call(store: string, op: string, id: string, ms: number): Promise<unknown> {
  const response = await mf.dispatchFetch("http://objects/store", {
    method: "POST",
    body: JSON.stringify({ store, op, id, ms }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`the bridge answered ${response.status}: ${text}`);
  return (JSON.parse(text) as { result: unknown }).result;
}

/** A store inside the Worker, driven from here: each call is one request to the Worker. */
function bridged(name: string): DedupeStore {
  return {
    claim: (id, lease) => call(name, "claim", id, lease) as Promise<ClaimResult>,
    complete: async (id, ttl) => void (await call(name, "complete", id, ttl)),
    release: async (id) => void (await call(name, "release", id, 0)),
  };
}

/** Every key stored in the objects of a scope with 4 shards, each as `<shard>|<key>`. */
async function storedKeys(scope: string): Promise<string[]> {
  const held = await Promise.all(Array.from({ length: 4 }, (_, shard) => keysOf(`${scope}:${shard}`)));
  return held.flatMap((keys, shard) => keys.map((key) => `${shard}|${key}`));
}

describeStoreContract(
  "DurableObjectDedupeStore in workerd (miniflare)",
  {
    shared: true,
    scoped: true,
    async make() {
      return { store: bridged("a"), peer: bridged("b"), otherScope: bridged("other") };
    },
  },
  () => {
    it("keeps each id in one object of its scope, spread over the shards, and its alarm deletes records that expired", async () => {
      const ids = Array.from({ length: 24 }, () => `evt_${randomUUID()}`);
      const a = bridged("a");
      expect(await Promise.all(ids.map((id) => a.claim(id, 10_000)))).toEqual(ids.map(() => "claimed"));
      await Promise.all(ids.map((id) => a.complete(id, 1500)));
      const records = new Set(ids.map((id) => `id:contract#${id}`));
      const held = (await storedKeys("contract")).filter((key) => records.has(key.split("|")[1] as string));
      expect(held).toHaveLength(ids.length);
      expect(new Set(held.map((key) => key.split("|")[0])).size).toBeGreaterThan(1);
      // One expiry index key per record: the claim's went when the record was completed.
      const all = (await storedKeys("contract")).filter((key) => ids.some((id) => key.includes(id)));
      expect(all).toHaveLength(2 * ids.length);
      // Nothing reads them again: only the alarm can delete them (and their expiry index keys).
      await expect
        .poll(async () => (await storedKeys("contract")).filter((key) => ids.some((id) => key.includes(id))), {
          timeout: 6000,
          interval: 100,
        })
        .toEqual([]);
    });

    it("costs one request to an object per claim, completion and release: 2 per delivery, 1 per duplicate", async () => {
      const requests = async () => (await (await mf.dispatchFetch("http://objects/object-requests")).json()) as number;
      const counted = bridged("counted");
      const id = `evt_${randomUUID()}`;
      const start = await requests();
      expect(await counted.claim(id, 10_000)).toBe("claimed");
      await counted.complete(id, 60_000);
      expect((await requests()) - start).toBe(2);
      expect(await counted.claim(id, 10_000)).toBe("done");
      expect((await requests()) - start).toBe(3);
      const other = `evt_${randomUUID()}`;
      expect(await counted.claim(other, 10_000)).toBe("claimed");
      await counted.release(other);
      expect((await requests()) - start).toBe(5);
    });

    it("dedupes an id too long for a storage key under its SHA-256", async () => {
      const id = `evt_${"é".repeat(3000)}`;
      expect(await bridged("a").claim(id, 10_000)).toBe("claimed");
      expect(await bridged("b").claim(id, 10_000)).toBe("in_flight");
      expect(await bridged("b").claim(`${id}x`, 10_000)).toBe("claimed");
    });
  },
);

describe("DurableObjectDedupeStore over a real namespace: shards", () => {
  it("spreads ids over 16 objects by default, by the same hash", async () => {
    const store = new DurableObjectDedupeStore(dedupe, { scope: "default-shards" });
    const ids = Array.from({ length: 16 }, newId);
    for (const id of ids) expect(await store.claim(id, 10_000)).toBe("claimed");
    const expected = ids.map((id) => [fnv1a(`default-shards#${id}`) % 16]);
    expect(
      await holders(
        "default-shards",
        16,
        ids.map((id) => `default-shards#${id}`),
      ),
    ).toEqual(expected);
  });

  it("with shards: 1, every id lives in <scope>:0", async () => {
    const store = new DurableObjectDedupeStore(dedupe, { scope: "one-shard", shards: 1 });
    const ids = Array.from({ length: 4 }, newId);
    for (const id of ids) expect(await store.claim(id, 10_000)).toBe("claimed");
    expect((await keysOf("one-shard:0")).filter((key) => key.startsWith("id:")).sort()).toEqual(
      ids.map((id) => `id:one-shard#${id}`).sort(),
    );
  });
});

describe("DurableObjectDedupeStore: what it sends, and answers a DedupeObject never gives", () => {
  async function last(scope: string): Promise<unknown> {
    const stub = odd.get(odd.idFromName(`${scope}:0`) as never) as unknown as { fetch(url: string): Promise<Response> };
    return (await stub.fetch("https://object/__last")).json();
  }

  it("POSTs one JSON command per call: the op, scope#id, the ms rounded up, this store's token, and a claim's own", async () => {
    const store = new DurableObjectDedupeStore(odd, { scope: "sent", shards: 1 });
    const other = new DurableObjectDedupeStore(odd, { scope: "sent", shards: 1 });
    expect(await store.claim("evt_1", 1.2)).toBe("claimed");
    const claim = (await last("sent")) as { method: string; url: string; command: { token: string } };
    expect(claim).toEqual({
      method: "POST",
      url: "https://dedupe-object/",
      command: {
        op: "claim",
        key: "sent#evt_1",
        ms: 2,
        token: expect.stringMatching(/^claim\.[0-9a-z]+$/),
        claim: expect.stringMatching(/^claim\.[0-9a-z]+$/),
      },
    });
    await store.complete("evt_1", 60_000.5);
    expect(await last("sent")).toMatchObject({ command: { op: "complete", key: "sent#evt_1", ms: 60_001 } });
    await store.release("evt_1");
    expect(await last("sent")).toMatchObject({ command: { op: "release", key: "sent#evt_1", ms: 0 } });
    expect(((await last("sent")) as { command: { token: string } }).command.token).toBe(claim.command.token);
    await other.release("evt_1");
    expect(((await last("sent")) as { command: { token: string } }).command.token).not.toBe(claim.command.token);
  });

  it("an answer that is not 200 rejects every operation, naming the status", async () => {
    const store = new DurableObjectDedupeStore(odd, { scope: "odd", shards: 1 });
    await expect(store.claim("status-500", 1000)).rejects.toThrow("the DedupeObject answered 500");
    await expect(store.claim("status-201", 1000)).rejects.toThrow("the DedupeObject answered 201");
    await expect(store.complete("status-500", 1000)).rejects.toThrow("the DedupeObject answered 500");
    await expect(store.release("status-500")).rejects.toThrow("the DedupeObject answered 500");
  });

  it("a claim answered without one of claimed, in_flight, done rejects; a completion's answer is not read", async () => {
    const store = new DurableObjectDedupeStore(odd, { scope: "odd", shards: 1 });
    await expect(store.claim("no-result", 1000)).rejects.toThrow("the DedupeObject answered a claim with no result");
    await expect(store.claim("bad-result", 1000)).rejects.toThrow("the DedupeObject answered a claim with no result");
    await expect(store.complete("bad-result", 1000)).resolves.toBeUndefined();
    await expect(store.release("no-result")).resolves.toBeUndefined();
  });
});

describe("DurableObjectDedupeStore options", () => {
  it("requires a namespace binding: idFromName and get", () => {
    const get = () => undefined;
    const idFromName = () => undefined;
    for (const namespace of [undefined, null, {}, { get }, { idFromName }, { idFromName: 1, get }]) {
      expect(() => new DurableObjectDedupeStore(namespace as never, { scope: "a" })).toThrow(
        new TypeError("flag-webhooks: DurableObjectDedupeStore needs a Durable Object namespace binding"),
      );
    }
    expect(new DurableObjectDedupeStore({ idFromName, get } as never, { scope: "a" })).toBeInstanceOf(
      DurableObjectDedupeStore,
    );
  });

  it("requires a scope, naming the option, also when options are missing", () => {
    for (const options of [
      undefined,
      {},
      { scope: "" },
      { scope: "a:b" },
      { scope: "a#b" },
      { scope: "x".repeat(101) },
    ]) {
      expect(() => new DurableObjectDedupeStore(dedupe, options as never)).toThrow(
        new TypeError(
          'flag-webhooks: option "scope" of DurableObjectDedupeStore must be 1-100 characters of A-Z a-z 0-9 . _ -',
        ),
      );
    }
  });

  it("takes a whole number of shards from 1 to 1024", () => {
    for (const shards of [0, -1, 1.5, 1025, Number.NaN, Number.POSITIVE_INFINITY, "4"]) {
      expect(() => new DurableObjectDedupeStore(dedupe, { scope: "a", shards } as never)).toThrow(
        new TypeError('flag-webhooks: DurableObjectDedupeStore option "shards" must be a whole number from 1 to 1024'),
      );
    }
    for (const shards of [1, 2, 1024]) {
      expect(new DurableObjectDedupeStore(dedupe, { scope: "a", shards })).toBeInstanceOf(DurableObjectDedupeStore);
    }
  });
});

describe("DedupeObject in workerd: its protocol, its storage and its alarm", () => {
  /** Sends `body` as it is to the object `name` of the DEDUPE namespace. */
  async function raw(name: string, body: string): Promise<{ status: number; json: unknown }> {
    const stub = dedupe.get(dedupe.idFromName(name) as never) as unknown as {
      fetch(url: string, init: { method: string; body: string }): Promise<Response>;
    };
    const response = await stub.fetch("https://dedupe-object/", { method: "POST", body });
    return { status: response.status, json: await response.json() };
  }
  const command = (fields: Record<string, unknown>) =>
    JSON.stringify({ op: "claim", key: `protocol#${randomUUID()}`, ms: 1000, token: "t", ...fields });

  it("answers 400 to anything that is not a dedupe command, and takes a lease of 0 ms", async () => {
    const bad = [
      "not json",
      "null",
      "[]",
      command({ op: "nope" }),
      command({ op: undefined }),
      command({ key: "" }),
      command({ key: 5 }),
      command({ token: undefined }),
      command({ token: 5 }),
      command({ ms: "5" }),
      command({ ms: -1 }),
      command({ ms: undefined }),
      // JSON has no Infinity, but 1e999 reads as it.
      command({ ms: 1 }).replace('"ms":1', '"ms":1e999'),
    ];
    for (const body of bad) {
      expect(await raw("protocol:0", body), body).toEqual({ status: 400, json: { error: "not a dedupe command" } });
    }
    for (const [op, result] of [
      ["claim", "claimed"],
      ["complete", "ok"],
      ["release", "ok"],
    ]) {
      expect(await raw("protocol:0", command({ op, ms: 0 })), op).toEqual({ status: 200, json: { result } });
    }
  });

  it("keeps one expiry index key per record, at its expiry: a claim, its completion, a release", async () => {
    const store = new DurableObjectDedupeStore(dedupe, { scope: "index", shards: 1 });
    const held = async (id: string) => (await keysOf("index:0")).filter((key) => key.endsWith(`id:index#${id}`));
    const id = newId();
    const before = Date.now();
    expect(await store.claim(id, 60_000)).toBe("claimed");
    const claimed = await held(id);
    expect(claimed).toHaveLength(2);
    expect(claimed).toContain(`id:index#${id}`);
    const expiry = Number(claimed.find((key) => key.startsWith("exp:"))?.slice(4, 19));
    expect(expiry).toBeGreaterThanOrEqual(before + 60_000);
    expect(expiry).toBeLessThanOrEqual(Date.now() + 60_000);
    await store.complete(id, 120_000);
    const done = await held(id);
    expect(done).toHaveLength(2);
    expect(Number(done.find((key) => key.startsWith("exp:"))?.slice(4, 19))).toBeGreaterThanOrEqual(before + 120_000);
    // A done id is not released; a claim released goes with its index key.
    await store.release(id);
    expect(await held(id)).toEqual(done);
    const other = newId();
    expect(await store.claim(other, 60_000)).toBe("claimed");
    await store.release(other);
    expect(await held(other)).toEqual([]);
  });

  it("its alarm deletes what expired, earliest first, past one batch of 128, then runs again for the next, and leaves what did not", async () => {
    const store = new DurableObjectDedupeStore(dedupe, { scope: "alarm", shards: 1 });
    const lasting = newId();
    expect(await store.claim(lasting, 60_000)).toBe("claimed");
    await store.complete(lasting, 60_000);
    // Set after the lasting one: the alarm must move earlier for these.
    // Long enough that all of them are written before the first expires (writing them took
    // over 1.5 s on a busy 2-core machine, and the count below then found some already gone).
    // Written by a store inside workerd, in one request from here: 150 requests through
    // miniflare's proxy, 25 at a time, failed now and then under load (fetch failed, EPIPE).
    const brief = Array.from({ length: 150 }, newId);
    const written = await mf.dispatchFetch("http://localhost/store/complete-all", {
      method: "POST",
      body: JSON.stringify({ store: "alarm", ids: brief, ms: 5000 }),
    });
    expect(written.status).toBe(200);
    const leased = newId();
    expect(await store.claim(leased, 5000)).toBe("claimed");
    // Due after the first alarm: it sets the next alarm for this one.
    const next = newId();
    await store.complete(next, 6500);
    // Set after them, later: the alarm must not move later for this one.
    const later = newId();
    await store.complete(later, 60_000);
    expect((await keysOf("alarm:0")).length).toBe(2 * (brief.length + 4));
    // Nothing reads them again: only the alarm deletes them, and their index keys.
    await expect
      .poll(
        async () =>
          (await keysOf("alarm:0")).filter((key) => !key.endsWith(`#${lasting}`) && !key.endsWith(`#${later}`)),
        {
          timeout: 15_000,
          interval: 100,
        },
      )
      .toEqual([]);
    expect((await keysOf("alarm:0")).length).toBe(4);
    expect(await store.claim(lasting, 1000)).toBe("done");
    expect(await store.claim(later, 1000)).toBe("done");
  });
});
