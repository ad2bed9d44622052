import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import {
  type DedupeOptions,
  type DedupeStore,
  MemoryDedupeStore,
  RedisDedupeStore,
  type WebhookEvent,
} from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { Redis } from "ioredis";
import Koa from "koa";
import request from "supertest";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { delivery, signatureOf } from "../../support/deliveries.js";
import { close, listen } from "../../support/http.js";
import { CLIENT_KINDS, type ClientKind, type TestClient } from "../../support/redis-clients.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../../support/redis-server.js";

// Dedupe across a fleet, through the public adapters over real HTTP: receiver instances, each
// with its own client, on one real redis-server; the server killed and restarted mid-run.

const availability = redisAvailability();
const SECRET = "whsec-dedupe-redis-test";
const PREFIX = "fleet:";
const SCOPE = "audit-app";
const [IOREDIS, IOREDIS5, NODE_REDIS, NODE_REDIS4] = CLIENT_KINDS as [ClientKind, ClientKind, ClientKind, ClientKind];

type AdapterName = "Express" | "Koa" | "fetch";
const ADAPTERS: AdapterName[] = ["Express", "Koa", "fetch"];

/** One event as the service serialises it; `variant` 1 is the same event re-serialised. */
function eventBody(id: string, variant: 0 | 1 = 0): string {
  const data = {
    flag: "new-checkout",
    changes: [{ path: "on", from: false, to: true }],
    actor: { type: "user", email: "dana@example.com" },
  };
  if (variant === 0) {
    return JSON.stringify({ id, type: "flag.updated", createdAt: new Date().toISOString(), environment: "prod", data });
  }
  // Other key order, other spacing, same id: other bytes, so another signature.
  return JSON.stringify(
    { environment: "prod", data, type: "flag.updated", id, createdAt: new Date().toISOString() },
    null,
    2,
  );
}
const sign = (body: string, secret = SECRET) => signatureOf(secret, body);

/** A receiver instance as a user would run it: its own store (and client), its own server. */
interface Instance {
  server: Server;
  /** Ids whose handler started, in order (a failing run included). */
  started: string[];
  /** Ids whose handler finished successfully. */
  handled: string[];
  errors: unknown[];
}

interface InstanceOptions {
  store: DedupeStore;
  adapter: AdapterName;
  /** The handler's body, after it is recorded as started. Default: succeed at once. */
  work?: (event: WebhookEvent, attempt: number) => Promise<void> | void;
  dedupe?: Partial<DedupeOptions>;
}

const servers: Server[] = [];

async function instance({ store, adapter, work, dedupe }: InstanceOptions): Promise<Instance> {
  const self: Instance = { server: undefined as never, started: [], handled: [], errors: [] };
  const options = {
    secret: SECRET,
    dedupe: { store, ttl: 60_000, timeout: 300, ...dedupe },
    onError: (error: unknown) => void self.errors.push(error),
    async onEvent(event: WebhookEvent) {
      self.started.push(event.id);
      await work?.(event, self.started.filter((id) => id === event.id).length);
      self.handled.push(event.id);
    },
  };
  if (adapter === "Express") {
    const app = express();
    app.post("/webhooks", expressMiddleware(options));
    self.server = createServer(app);
  } else if (adapter === "Koa") {
    const app = new Koa();
    app.use(koaMiddleware(options));
    self.server = createServer(app.callback());
  } else {
    self.server = createAdaptorServer({ fetch: webhookHandler(options) }) as Server;
  }
  servers.push(await listen(self.server));
  return self;
}

async function post(target: Instance, body: string, signature?: string) {
  return request(target.server)
    .post("/webhooks")
    .set("content-type", "application/json")
    .set("service-signature", signature ?? (await sign(body)))
    .send(body);
}

/**
 * A sender: retries 409 delivery_in_progress and 503 store_unavailable after a short sleep (a
 * real one waits Retry-After seconds), until another answer. Returns it and the retries it took.
 */
async function deliver(target: Instance, body: string, signature?: string) {
  for (let retries = 0; ; retries++) {
    const answer = await post(target, body, signature);
    if ((answer.status !== 409 && answer.status !== 503) || retries >= 100) return { answer, retries };
    expect(answer.headers["retry-after"]).toMatch(/^\d+$/);
    await sleep(50);
  }
}

const count = (ids: string[], id: string) => ids.filter((x) => x === id).length;

// Nothing here may reject unhandled, even with Redis killed under load.
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => void unhandled.push(reason);
beforeAll(() => void process.on("unhandledRejection", onUnhandled));
afterAll(() => void process.off("unhandledRejection", onUnhandled));
afterEach(async () => {
  for (const server of servers.splice(0)) await close(server);
});

describe.skipIf(!availability.available)(
  availability.available ? "dedupe across instances on one redis-server" : `skipped: ${availability.reason}`,
  () => {
    let redis: RedisServer;
    const clients: TestClient[] = [];
    const store = async (kind: ClientKind, scope = SCOPE) => {
      const client = await kind.connect(redis.url);
      clients.push(client);
      return { store: new RedisDedupeStore(client.client, { prefix: PREFIX, scope }), client };
    };
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      for (const client of clients.splice(0)) await client.quit();
      await stopRedis(redis);
      expect(unhandled).toEqual([]);
    });

    // Two instances, each with its own client (mixing libraries too), on every adapter.
    const pairs: [AdapterName, ClientKind, ClientKind][] = [
      ...ADAPTERS.map((a): [AdapterName, ClientKind, ClientKind] => [a, IOREDIS, IOREDIS]),
      ...ADAPTERS.map((a): [AdapterName, ClientKind, ClientKind] => [a, NODE_REDIS, NODE_REDIS]),
      ["Express", IOREDIS5, NODE_REDIS4],
      ["fetch", NODE_REDIS4, IOREDIS5],
    ];

    describe.each(pairs)("%s, instances on %s and %s", (adapter, kindA, kindB) => {
      let a: Instance;
      let b: Instance;
      // The handler waits for the gate, so the copy that claimed is still running when the other
      // copy is answered, however slow the machine.
      let open: () => void;
      beforeEach(async () => {
        const gate = new Promise<void>((resolve) => {
          open = resolve;
        });
        const work = () => gate;
        a = await instance({ adapter, store: (await store(kindA)).store, work });
        b = await instance({ adapter, store: (await store(kindB)).store, work });
      });

      it("the same delivery at the same moment to both instances runs the handler once; the other copy is told to retry", async () => {
        const id = `evt_${randomUUID()}`;
        const body = eventBody(id);
        const copies = [post(a, body).then((r) => r), post(b, body).then((r) => r)];
        // The first answer is the copy that did not claim; then the handler may finish.
        await Promise.race(copies);
        open();
        const answers = await Promise.all(copies);
        expect(count([...a.started, ...b.started], id)).toBe(1);
        const statuses = answers.map((r) => r.status).sort();
        expect(statuses).toEqual([204, 409]);
        const busy = answers.find((r) => r.status === 409);
        expect(busy?.body.error.code).toBe("delivery_in_progress");
        expect(busy?.headers["retry-after"]).toBe("5");
        const first = answers.find((r) => r.status === 204);
        expect(first?.headers["webhook-duplicate"]).toBeUndefined();

        // The sender retries the 409 later, at either instance: a duplicate now, not run again.
        for (const target of [a, b]) {
          const retry = await post(target, body);
          expect(retry.status).toBe(204);
          expect(retry.headers["webhook-duplicate"]).toBe("true");
        }
        expect(count([...a.handled, ...b.handled], id)).toBe(1);
      });

      it("many copies racing across both instances still run the handler exactly once", async () => {
        const id = `evt_${randomUUID()}`;
        const body = eventBody(id);
        setTimeout(() => open(), 100);
        const results = await Promise.all(Array.from({ length: 8 }, (_, i) => deliver(i % 2 ? a : b, body)));
        expect(results.map((r) => r.answer.status)).toEqual(Array(8).fill(204));
        expect(results.filter((r) => r.answer.headers["webhook-duplicate"] === "true")).toHaveLength(7);
        expect(count([...a.started, ...b.started], id)).toBe(1);
      });
    });

    describe.each(ADAPTERS)("%s", (adapter) => {
      it("the same event re-serialised and re-signed (same id, other bytes) is a duplicate", async () => {
        const a = await instance({ adapter, store: (await store(IOREDIS)).store });
        const b = await instance({ adapter, store: (await store(NODE_REDIS)).store });
        const id = `evt_${randomUUID()}`;
        const original = eventBody(id, 0);
        const copy = eventBody(id, 1);
        expect(copy).not.toBe(original);
        expect(await sign(copy)).not.toBe(await sign(original));
        expect((await post(a, original)).status).toBe(204);
        const again = await post(b, copy);
        expect([again.status, again.headers["webhook-duplicate"]]).toEqual([204, "true"]);
        expect([...a.started, ...b.started]).toEqual([id]);
      });

      it("a forged copy never claims the id: 401, no key in Redis, and the authentic delivery still runs", async () => {
        const { store: own, client } = await store(IOREDIS);
        const a = await instance({ adapter, store: own });
        const id = `evt_${randomUUID()}`;
        const body = eventBody(id);
        for (const signature of [await sign(body, "not-the-secret"), "0".repeat(64), "zz"]) {
          const forged = await post(a, body, signature);
          expect([forged.status, forged.body.error.code]).toEqual([401, "invalid_signature"]);
        }
        expect(await client.keys(`*${id}*`)).toEqual([]);
        const authentic = await post(a, body);
        expect([authentic.status, authentic.headers["webhook-duplicate"]]).toEqual([204, undefined]);
        expect(a.handled).toEqual([id]);
        expect(await client.get(`${PREFIX}${SCOPE}:${id}`)).toBe("done");
      });

      it("a handler that fails releases the claim, so the sender's retry runs it, once", async () => {
        const { store: own, client } = await store(NODE_REDIS);
        const failFirst = (_event: WebhookEvent, attempt: number) => {
          if (attempt === 1) throw new Error("database unavailable");
        };
        const a = await instance({ adapter, store: own, work: failFirst });
        const b = await instance({ adapter, store: (await store(IOREDIS)).store, work: failFirst });
        const id = `evt_${randomUUID()}`;
        const body = eventBody(id);
        const failed = await post(a, body);
        expect([failed.status, failed.body.error.code]).toEqual([500, "handler_error"]);
        expect(JSON.stringify(failed.body)).not.toContain("database unavailable");
        expect(await client.keys(`*${id}*`)).toEqual([]);
        // The retry lands on the other instance (whose own first attempt fails too), then here.
        expect((await post(b, body)).status).toBe(500);
        const retried = await post(a, body);
        expect([retried.status, retried.headers["webhook-duplicate"]]).toEqual([204, undefined]);
        expect(a.started).toEqual([id, id]);
        expect(a.handled).toEqual([id]);
        expect((await post(b, body)).headers["webhook-duplicate"]).toBe("true");
      });
    });

    // The service sends one event, with one id, to every endpoint subscribed to
    // it: here an audit app and a cache app, two instances each, all on one Redis with the default
    // prefix. Each app must process every event once: apps never dedupe against each other,
    // instances of one app do.
    it("two apps on one Redis, each with its scope and two instances: each app processes every event exactly once", async () => {
      const app = async (scope: string, kinds: [ClientKind, ClientKind], adapter: AdapterName) => {
        const instances: Instance[] = [];
        for (const kind of kinds) {
          const client = await kind.connect(redis.url);
          clients.push(client);
          // No prefix: the default one, shared by both apps, as in the report.
          instances.push(await instance({ adapter, store: new RedisDedupeStore(client.client, { scope }) }));
        }
        return instances;
      };
      const audit = await app("audit-app", [IOREDIS, NODE_REDIS], "Express");
      const cache = await app("cache-app", [NODE_REDIS, IOREDIS], "fetch");
      const ids = Array.from({ length: 10 }, () => `evt_${randomUUID()}`);
      // Every event to both apps; each app gets it twice (the service's retry), once per instance,
      // half of them at the same moment.
      const answers = await Promise.all(
        ids.flatMap((id, n) =>
          [audit, cache].map(async ([first, second]) => {
            const body = eventBody(id);
            if (n % 2) return Promise.all([deliver(first as Instance, body), deliver(second as Instance, body)]);
            const one = await deliver(first as Instance, body);
            return [one, await deliver(second as Instance, body)];
          }),
        ),
      );
      expect(answers.flat().map((r) => r.answer.status)).toEqual(Array(40).fill(204));
      for (const fleet of [audit, cache]) {
        const handled = fleet.flatMap((one) => one.handled);
        expect(ids.map((id) => count(handled, id))).toEqual(Array(10).fill(1));
        expect(handled).toHaveLength(10);
      }
      const inspect = clients.at(-1) as TestClient;
      for (const scope of ["audit-app", "cache-app"]) {
        expect(await inspect.get(`flag-webhooks:dedupe:${scope}:${ids[0]}`)).toBe("done");
      }
    });

    it("Express without onEvent: a route that answers 5xx releases the claim, one that answers 2xx completes it", async () => {
      const { store: own, client } = await store(IOREDIS);
      let fail = true;
      const app = express();
      app.post("/webhooks", expressMiddleware({ secret: SECRET, dedupe: { store: own, ttl: 60_000 } }), (_req, res) => {
        res.sendStatus(fail ? 503 : 204);
      });
      const server = await listen(createServer(app));
      servers.push(server);
      const target = { server } as Instance;
      const id = `evt_${randomUUID()}`;
      const body = eventBody(id);
      expect((await post(target, body)).status).toBe(503);
      // "finish" fires after the answer is sent: give the release its round trip.
      await expect.poll(() => client.keys(`*${id}*`)).toEqual([]);
      fail = false;
      expect((await post(target, body)).status).toBe(204);
      await expect.poll(() => client.get(`${PREFIX}${SCOPE}:${id}`)).toBe("done");
      expect((await post(target, body)).headers["webhook-duplicate"]).toBe("true");
    });

    describe.each([
      ["MemoryDedupeStore", async () => new MemoryDedupeStore()],
      ["RedisDedupeStore on ioredis", async () => (await store(IOREDIS)).store],
      ["RedisDedupeStore on node-redis", async () => (await store(NODE_REDIS)).store],
    ])("one instance, %s: a handler that outlives its lease", (_name, makeStore) => {
      it("fails without releasing the claim a later copy took meanwhile", async () => {
        // Copy 1 outlives its 600 ms lease, so copy 2 (sent at 700 ms) claims the id; copy 1 then
        // fails. Its failure must not free copy 2's claim: copy 3, sent once copy 1 was answered
        // (its settling done), is told to retry rather than run alongside copy 2, which finishes
        // only after that.
        let open: () => void = () => undefined;
        const gate = new Promise<void>((resolve) => {
          open = resolve;
        });
        const a: Instance = await instance({
          adapter: "Express",
          store: await makeStore(),
          dedupe: { inFlightTtl: 600 },
          async work(_event, attempt) {
            if (attempt === 1) {
              await expect.poll(() => a.started.length, { timeout: 5000, interval: 5 }).toBe(2);
              throw new Error("slow and failed");
            }
            await gate;
          },
        });
        const id = `evt_${randomUUID()}`;
        const body = eventBody(id);
        const first = post(a, body).then((r) => r);
        await sleep(700);
        const second = post(a, body).then((r) => r);
        expect((await first).status).toBe(500);
        const third = await post(a, body);
        expect([third.status, third.body.error?.code]).toEqual([409, "delivery_in_progress"]);
        open();
        expect((await second).status).toBe(204);
        expect(a.started).toEqual([id, id]);
        expect(a.handled).toEqual([id]);
        expect((await post(a, body)).headers["webhook-duplicate"]).toBe("true");
      });
    });
  },
);

describe.skipIf(!availability.available)(
  availability.available ? "Redis killed mid-run, then restarted" : `skipped: ${availability.reason}`,
  () => {
    describe.each(CLIENT_KINDS)("instances on $name", (kind) => {
      let redis: RedisServer;
      const clients: TestClient[] = [];
      beforeAll(async () => {
        redis = await startRedis();
      });
      afterAll(async () => {
        for (const client of clients.splice(0)) await client.quit();
        await stopRedis(redis);
        expect(unhandled).toEqual([]);
      });

      it("answers 503 store_unavailable while Redis is down (401 to a forgery), fails open only when asked, and handles the retry once after the restart", async () => {
        const connect = async () => {
          const client = await kind.connect(redis.url);
          clients.push(client);
          return new RedisDedupeStore(client.client, { prefix: PREFIX, scope: SCOPE });
        };
        let release: () => void = () => undefined;
        const held = new Promise<void>((resolve) => {
          release = resolve;
        });
        const running = `evt_running_${randomUUID()}`;
        const work = (event: WebhookEvent) => (event.id === running ? held : undefined);
        // The fleet: Express and fetch instances, and a Koa instance that chose failOpen.
        const expressInstance = await instance({ adapter: "Express", store: await connect(), work });
        const fetchInstance = await instance({ adapter: "fetch", store: await connect() });
        const openInstance = await instance({ adapter: "Koa", store: await connect(), dedupe: { failOpen: true } });
        const fleet = [expressInstance, fetchInstance, openInstance];

        const before = `evt_${randomUUID()}`;
        expect((await post(fetchInstance, eventBody(before))).status).toBe(204);

        // A handler is running when the server dies: its answer stands; completing it fails.
        const midRun = post(expressInstance, eventBody(running)).then((r) => r);
        await expect.poll(() => expressInstance.started).toContain(running);
        await redis.stop(true);
        release();
        expect((await midRun).status).toBe(204);
        // Marking it done is retried within dedupe.timeout after the answer went out, then reported.
        await expect.poll(() => expressInstance.errors.length, { timeout: 10_000 }).toBeGreaterThan(0);

        const id = `evt_${randomUUID()}`;
        const body = eventBody(id);
        for (const target of [expressInstance, fetchInstance]) {
          const down = await post(target, body);
          expect([down.status, down.body.error.code]).toEqual([503, "store_unavailable"]);
          expect(down.headers["retry-after"]).toBe("10");
          const forged = await post(target, body, await sign(body, "forged"));
          expect([forged.status, forged.body.error.code]).toEqual([401, "invalid_signature"]);
          expect(target.errors.length).toBeGreaterThan(0);
        }
        expect(count([...expressInstance.started, ...fetchInstance.started], id)).toBe(0);

        // failOpen: processed without dedupe while the store is down (twice, if sent twice).
        const open = `evt_${randomUUID()}`;
        expect((await post(openInstance, eventBody(open))).status).toBe(204);
        expect((await post(openInstance, eventBody(open))).status).toBe(204);
        expect(count(openInstance.handled, open)).toBe(2);
        expect((await post(openInstance, eventBody(open), await sign("x", "forged"))).status).toBe(401);

        // Back up (empty: no persistence): the sender's retries are handled once, whichever
        // instances they reach, concurrently or not.
        await redis.restart();
        const retries = await Promise.all([
          deliver(expressInstance, body),
          deliver(fetchInstance, body),
          deliver(expressInstance, body),
        ]);
        expect(retries.map((r) => r.answer.status)).toEqual([204, 204, 204]);
        expect(retries.filter((r) => r.answer.headers["webhook-duplicate"] === "true")).toHaveLength(2);
        expect(count([...expressInstance.handled, ...fetchInstance.handled], id)).toBe(1);
        const after = await deliver(openInstance, body);
        expect([after.answer.status, after.answer.headers["webhook-duplicate"]]).toEqual([204, "true"]);
        expect(count(openInstance.handled, id)).toBe(0);
        for (const target of fleet) expect(target.server.listening).toBe(true);
        expect(unhandled).toEqual([]);
      });
    });
  },
);

/** A POST of a delivery to a fetch handler. */
const requestOf = (d: { body: string; headers: Record<string, string> }) =>
  new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers });

describe.skipIf(!availability.available)(
  `Redis failing between the claim and marking the id done${availability.available ? "" : ` (skipped: ${availability.reason})`}`,
  () => {
    let server: RedisServer;
    let client: Redis;
    beforeAll(async () => {
      server = await startRedis();
      // No offline queue: a command sent while Redis is down fails at once instead of waiting for
      // the reconnection (node-redis with disableOfflineQueue, or a connection lost mid-command).
      client = new Redis(server.url, { retryStrategy: () => 50, enableOfflineQueue: false });
      client.on("error", () => undefined);
    });
    beforeEach(async () => {
      // Connected before each case: the claim is made while Redis is up.
      await vi.waitFor(() => expect(client.status).toBe("ready"), { timeout: 5000 });
    });
    afterAll(async () => {
      client?.disconnect();
      await stopRedis(server);
    });

    it("retries marking the id done within dedupe.timeout: Redis killed mid-handler and back within it", async () => {
      const store = new RedisDedupeStore(client, { scope: "claim-to-done", prefix: "claim-to-done:" });
      let runs = 0;
      const handler = webhookHandler({
        secret: SECRET,
        dedupe: { store, ttl: 60_000, timeout: 3000 },
        onError: () => undefined,
        onEvent: async () => {
          runs++;
          // Redis dies while the handler works, and comes back a moment later.
          await server.stop(true);
          setTimeout(() => void server.restart(), 400);
        },
      });
      const d = await delivery(SECRET);
      expect((await handler(requestOf(d))).status).toBe(204);
      // The id was marked done after Redis came back: a later copy is a duplicate, not a second run.
      const again = await handler(requestOf(d));
      expect([again.status, again.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
      expect(runs).toBe(1);
    });

    it("reports, and still answers 204, when Redis stays down past dedupe.timeout (the documented window)", async () => {
      const store = new RedisDedupeStore(client, { scope: "claim-to-done-down" });
      const onError = vi.fn();
      const handler = webhookHandler({
        secret: SECRET,
        dedupe: { store, ttl: 60_000, timeout: 300 },
        onError,
        onEvent: async () => {
          await server.stop(true);
        },
      });
      expect((await handler(requestOf(await delivery(SECRET)))).status).toBe(204);
      expect(onError).toHaveBeenCalled();
      await server.restart();
      await sleep(100);
    });
  },
);
