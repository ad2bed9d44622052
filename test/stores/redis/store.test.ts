import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { RedisDedupeStore, WebhookError } from "flag-webhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_KINDS, type TestClient } from "../../support/redis-clients.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../../support/redis-server.js";
import { type ContractSubject, describeStoreContract } from "../../support/store-contract.js";

// RedisDedupeStore over each supported client library (ioredis 6 and 5, node-redis 5 and 4)
// against a real redis-server: the contract every store passes, the keys it writes, a server that
// stops answering or is killed, and its options. Real time, short ttls. Receivers on Redis, as a
// fleet: receivers.test.ts.

const availability = redisAvailability();
const PREFIX = "contract:";
const SCOPE = "audit-app";
const KEY = `${PREFIX}${SCOPE}:`; // what every key of the store under test starts with
const id = () => `evt_${randomUUID()}`;

let server: RedisServer | undefined;
const clients: TestClient[] = [];
/** Per client kind, the client the cases use to look at the keys through the library's own API. */
const inspectors = new Map<string, TestClient>();
afterAll(async () => {
  await stopRedis(server);
});
for (const kind of CLIENT_KINDS) {
  describeStoreContract(
    `RedisDedupeStore on ${kind.name}`,
    {
      skip: availability.available ? undefined : availability.reason,
      shared: true,
      scoped: true,
      async make() {
        server ??= await startRedis();
        // Two clients, as two receiver instances would have, on one server.
        const mine = await kind.connect(server.url);
        const theirs = await kind.connect(server.url);
        clients.push(mine, theirs);
        inspectors.set(kind.name, mine);
        return {
          store: new RedisDedupeStore(mine.client, { prefix: PREFIX, scope: SCOPE }),
          peer: new RedisDedupeStore(theirs.client, { prefix: PREFIX, scope: SCOPE }),
          // Another endpoint (another webhook subscription) on the same Redis and prefix.
          otherScope: new RedisDedupeStore(theirs.client, { prefix: PREFIX, scope: "cache-app" }),
        };
      },
      async close() {
        for (const client of clients.splice(0)) await client.quit();
      },
    },
    (subject) => redisKeyCases(kind.name, subject),
  );
}

/** Redis only: what the keys look like on the server. */
function redisKeyCases(kindName: string, subject: () => ContractSubject): void {
  it("keys are <prefix><scope>:<id> and always expire: the lease while in flight, the ttl once done", async () => {
    const inspect = inspectors.get(kindName) as TestClient;
    const s = subject();
    const event = id();
    await s.store.claim(event, 5000);
    expect(await inspect.keys(`*${event}*`)).toEqual([`${KEY}${event}`]);
    const leased = await inspect.pttl(`${KEY}${event}`);
    expect(leased).toBeGreaterThan(4000);
    expect(leased).toBeLessThanOrEqual(5000);
    await s.store.complete(event, 60_000);
    const done = await inspect.pttl(`${KEY}${event}`);
    expect(done).toBeGreaterThan(55_000);
    expect(done).toBeLessThanOrEqual(60_000);
    expect(await inspect.get(`${KEY}${event}`)).toBe("done");
  });

  it("without a prefix option, keys are flag-webhooks:dedupe:<scope>:<id>; another prefix is another namespace", async () => {
    const inspect = inspectors.get(kindName) as TestClient;
    const s = subject();
    const store = new RedisDedupeStore(inspect.client, { scope: SCOPE });
    const event = id();
    expect(await store.claim(event, 5000)).toBe("claimed");
    expect(await inspect.keys(`*${event}*`)).toEqual([`flag-webhooks:dedupe:${SCOPE}:${event}`]);
    expect(await new RedisDedupeStore(inspect.client, { prefix: "other:", scope: SCOPE }).claim(event, 5000)).toBe(
      "claimed",
    );
    expect(await s.store.claim(event, 5000)).toBe("claimed");
  });

  it("a scope that another scope starts with is still another endpoint (the key ends the scope with a colon)", async () => {
    const inspect = inspectors.get(kindName) as TestClient;
    const event = id();
    const short = new RedisDedupeStore(inspect.client, { prefix: PREFIX, scope: "app" });
    const long = new RedisDedupeStore(inspect.client, { prefix: PREFIX, scope: "app.v2" });
    expect(await short.claim(event, 5000)).toBe("claimed");
    expect(await long.claim(event, 5000)).toBe("claimed");
    expect((await inspect.keys(`*${event}*`)).sort()).toEqual([`${PREFIX}app.v2:${event}`, `${PREFIX}app:${event}`]);
  });

  it("a fractional or sub-millisecond lease still expires (PX is rounded up to 1 ms or more)", async () => {
    const inspect = inspectors.get(kindName) as TestClient;
    const s = subject();
    const event = id();
    expect(await s.store.claim(event, 0.2)).toBe("claimed");
    const left = await inspect.pttl(`${KEY}${event}`);
    expect(left === -2 || (left >= 0 && left <= 1)).toBe(true);
  });
}

// Calls made directly (an idempotent worker's claim) are bounded by the store's
// own `timeout`, whatever the client does while Redis is away.
describe.skipIf(!availability.available)(
  availability.available ? "RedisDedupeStore timeout" : `RedisDedupeStore timeout (skipped: ${availability.reason})`,
  () => {
    describe.each(CLIENT_KINDS)("on $name", (kind) => {
      let redis: RedisServer;
      let inspect: TestClient;
      let store: RedisDedupeStore;
      beforeAll(async () => {
        redis = await startRedis();
        inspect = await kind.connect(redis.url);
        store = new RedisDedupeStore(inspect.client, { scope: SCOPE, timeout: 300 });
      });
      afterAll(async () => {
        await inspect?.quit();
        await stopRedis(redis);
      });
      /** What a promise settled with, or "pending" after a generous bound (not a timing assertion). */
      const settle = (promise: Promise<unknown>) =>
        Promise.race([
          promise.then(
            (value) => ({ value }),
            (error: unknown) => ({ error }),
          ),
          sleep(10_000).then(() => "pending" as const),
        ]);

      it("a server that stops answering: each call rejects with store_unavailable, and a claim that lands late is freed", async () => {
        const done = id();
        expect(await store.claim(done, 10_000)).toBe("claimed");
        await store.complete(done, 60_000);
        const late = id();
        process.kill(redis.pid, "SIGSTOP"); // alive, connected, silent
        try {
          const results = await Promise.all([
            settle(store.claim(late, 10_000)),
            settle(store.complete(done, 60_000)),
            settle(store.release(id())), // not `late`: its release would delete the late claim itself
          ]);
          for (const result of results) {
            expect(result).not.toBe("pending");
            const { error } = result as { error: WebhookError };
            expect(error).toBeInstanceOf(WebhookError);
            expect([error.code, error.status, error.message]).toEqual([
              "store_unavailable",
              503,
              "Redis did not answer within 300 ms",
            ]);
          }
        } finally {
          process.kill(redis.pid, "SIGCONT");
        }
        // The store freed the claim when it gave up on it, on the same connection right after the
        // queued SET: the late claim landed, and was gone before anything else was read.
        const key = `flag-webhooks:dedupe:${SCOPE}:${late}`;
        expect(await inspect.get(key)).toBeNull();
        expect(await store.claim(late, 10_000)).toBe("claimed");
        expect(await store.claim(done, 10_000)).toBe("done");
      });

      it("a server that was killed: a direct claim(), complete() and release() each reject instead of waiting for ever", async () => {
        await redis.stop(true);
        const event = id();
        for (const call of [store.claim(event, 10_000), store.complete(event, 60_000), store.release(event)]) {
          const result = await settle(call);
          expect(result).not.toBe("pending");
          expect((result as { error: unknown }).error).toBeInstanceOf(Error);
        }
        expect(inspect.errors.length).toBeGreaterThan(0);
      });
    });
  },
);

describe("RedisDedupeStore construction", () => {
  // A client object that is never called: construction checks only.
  const client = { call: async () => null };

  it("refuses something that is neither an ioredis nor a node-redis client", () => {
    for (const bad of [undefined, null, {}, { get: () => null }]) {
      expect(() => new RedisDedupeStore(bad as never, { scope: SCOPE })).toThrow(/ioredis or node-redis client/);
    }
  });

  it("requires a scope: missing or not 1-100 characters of A-Z a-z 0-9 . _ - is a TypeError naming the option", () => {
    const missing = [undefined, {}, { prefix: "myapp:" }] as never[];
    const invalid = ["", "audit app", "audit:app", "audit/app", "é", "x".repeat(101), 42, null, ["a"]];
    for (const options of [...missing, ...invalid.map((scope) => ({ scope }) as never)]) {
      const error = (() => {
        try {
          new RedisDedupeStore(client, options);
        } catch (caught) {
          return caught;
        }
      })();
      expect(error).toBeInstanceOf(TypeError);
      expect((error as TypeError).message).toMatch(/option "scope" of RedisDedupeStore must be 1-100 characters/);
    }
    for (const scope of ["a", "audit-app", "Cache_App.v2", "x".repeat(100)]) {
      expect(new RedisDedupeStore(client, { scope })).toBeInstanceOf(RedisDedupeStore);
    }
  });

  it("refuses a timeout that is not a positive duration", () => {
    for (const timeout of [0, -1, "soon", Number.NaN]) {
      expect(() => new RedisDedupeStore(client, { scope: SCOPE, timeout })).toThrow(/option "timeout"/);
    }
  });
});

describe("RedisDedupeStore with a client of its own", () => {
  it("passes the client's own error on at once, not as a timeout", async () => {
    const refused = new Error("READONLY You can't write against a read only replica.");
    const store = new RedisDedupeStore({ call: () => Promise.reject(refused) }, { scope: "app", timeout: "10s" });
    const began = Date.now();
    await expect(store.claim("evt_1", 1000)).rejects.toBe(refused);
    await expect(store.complete("evt_1", 1000)).rejects.toBe(refused);
    expect(Date.now() - began).toBeLessThan(5000);
  });

  it("reads a claim that found no key as claimed, whether the client says null or undefined", async () => {
    for (const nothing of [null, undefined]) {
      const sent: string[][] = [];
      const store = new RedisDedupeStore(
        {
          sendCommand: async (args: string[]) => {
            sent.push(args);
            return nothing;
          },
        },
        { scope: "app", prefix: "p:" },
      );
      expect(await store.claim("evt_1", 1500.2)).toBe("claimed");
      expect(sent[0]?.slice(0, 2)).toEqual(["SET", "p:app:evt_1"]);
      expect(sent[0]?.slice(3)).toEqual(["PX", "1501", "NX", "GET"]);
    }
  });
});
