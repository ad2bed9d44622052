import { createHmac, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { runInNewContext } from "node:vm";
import { type EventQueue, enqueueTo } from "flag-webhooks/bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { webhookMiddleware as expressMiddleware } from "../src/adapters/express.js";
import { webhookHandler } from "../src/adapters/fetch.js";
import { type ClaimResult, type DedupeStore, MemoryDedupeStore, RedisDedupeStore, verifyEvent } from "../src/index.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "./support/redis-server.js";

// Issue 15, "Fail closed, never hang": items 5 to 9, through the public API.

const SECRET = "fail-closed-secret";
function request(overrides: Record<string, unknown> = {}) {
  const body = JSON.stringify({
    id: `evt_${randomUUID()}`,
    type: "flag.created",
    createdAt: new Date().toISOString(),
    environment: "production",
    data: {},
    ...overrides,
  });
  const signature = createHmac("sha256", SECRET).update(body).digest("hex");
  return {
    body,
    signature,
    make: () =>
      new Request("http://localhost/webhooks", {
        method: "POST",
        body,
        headers: { "service-signature": signature },
      }),
  };
}
const quiet = () => undefined;

describe("durations a timer cannot wait are refused when the receiver is made (item 6)", () => {
  const store = new MemoryDedupeStore();
  it.each([
    ["bodyTimeout", { bodyTimeout: "25d" }],
    ["dedupe.timeout", { dedupe: { store, ttl: "30d", timeout: "30d" } }],
    ["bodyTimeout", { bodyTimeout: 2 ** 31 }],
  ])("%s over 2^31-1 ms is a TypeError", (option, extra) => {
    expect(() => expressMiddleware({ secret: SECRET, ...extra })).toThrow(
      new RegExp(
        `^flag-webhooks: option "${option.replace(".", "\\.")}" must be at most 2147483647 ms \\(about 24\\.8 days`,
      ),
    );
  });

  it("enqueueTo's and RedisDedupeStore's timeouts are timers too", () => {
    const queue = { add: async () => ({}), defaultJobOptions: {} } as unknown as EventQueue;
    expect(() => enqueueTo(queue, { timeout: "30d" })).toThrow(/option "timeout" must be at most 2147483647 ms/);
    const client = { call: async () => null };
    expect(() => new RedisDedupeStore(client, { scope: "app", timeout: "30d" })).toThrow(
      /option "timeout" must be at most 2147483647 ms/,
    );
  });

  it("accepts the longest a timer can wait, and a ttl of 30 days (a ttl is no timer)", () => {
    expect(() =>
      expressMiddleware({ secret: SECRET, bodyTimeout: 2 ** 31 - 1, dedupe: { store, ttl: "30d", timeout: "24d" } }),
    ).not.toThrow();
  });
});

describe("a store that never answers, in any form, is bounded by dedupe.timeout (item 7)", () => {
  const never = {
    // biome-ignore lint/suspicious/noThenProperty: a store's own thenable is what this case is about.
    "a plain thenable": () => ({ then() {} }),
    "a Promise of another realm": () => runInNewContext("new Promise(() => {})") as Promise<ClaimResult>,
    "a native Promise": () => new Promise<ClaimResult>(() => {}),
  };
  it.each(Object.entries(never))("%s: the delivery is answered 503 store_unavailable", async (_name, pending) => {
    const store: DedupeStore = { claim: pending as () => Promise<ClaimResult>, complete() {}, release() {} };
    const onEvent = vi.fn();
    const handler = webhookHandler({
      secret: SECRET,
      dedupe: { store, ttl: 60_000, timeout: 100 },
      onEvent,
      onError: quiet,
    });
    const response = await handler(request().make());
    expect(response.status).toBe(503);
    expect((await response.json()).error.code).toBe("store_unavailable");
    expect(onEvent).not.toHaveBeenCalled();
  });

  it("a thenable whose then throws is a store failure too", async () => {
    const store: DedupeStore = {
      claim: () =>
        ({
          // biome-ignore lint/suspicious/noThenProperty: a store's own thenable is what this case is about.
          then() {
            throw new Error("broken thenable");
          },
        }) as unknown as Promise<ClaimResult>,
      complete() {},
      release() {},
    };
    const handler = webhookHandler({ secret: SECRET, dedupe: { store, ttl: 60_000 }, onEvent: quiet, onError: quiet });
    expect((await handler(request().make())).status).toBe(503);
  });
});

describe("a clock that names no instant fails closed (item 8)", () => {
  const old = request({ createdAt: "2001-01-01T00:00:00Z" });
  it.each([
    ["undefined", undefined],
    ["NaN", Number.NaN],
    ["a string", "2026-11-23T12:00:00Z"],
    ["Infinity", Number.POSITIVE_INFINITY],
  ])("now() returning %s refuses a 25-year-old event instead of accepting it", async (_name, value) => {
    const onEvent = vi.fn();
    const onError = vi.fn();
    const handler = webhookHandler({ secret: SECRET, maxAge: "5m", now: () => value as number, onEvent, onError });
    const response = await handler(old.make());
    expect(response.status).toBe(500);
    expect(onEvent).not.toHaveBeenCalled();
    expect(onError).toHaveBeenCalledWith(expect.any(TypeError), expect.any(Request));
    expect(String(onError.mock.calls[0]?.[0])).toContain('"now" must return a finite number');
    await expect(
      verifyEvent({
        secret: SECRET,
        payload: old.body,
        signature: old.signature,
        maxAge: "5m",
        now: () => value as number,
      }),
    ).rejects.toThrow(TypeError);
  });
});

describe("dedupe.ttl and the replay window (item 9)", () => {
  const store = new MemoryDedupeStore();
  it("refuses a ttl shorter than maxAge plus twice the minute of skew allowed: the README calls that a replay gap", () => {
    expect(() =>
      webhookHandler({ secret: SECRET, maxAge: "5m", dedupe: { store, ttl: "6m" }, onEvent: quiet }),
    ).toThrow(
      /option "dedupe\.ttl" \(360000 ms\) is shorter than maxAge plus twice the 60 s clock-skew allowance \(420000 ms\)/,
    );
    expect(() =>
      webhookHandler({ secret: SECRET, maxAge: "5m", dedupe: { store, ttl: 419_999 }, onEvent: quiet }),
    ).toThrow(TypeError);
  });

  it("accepts a ttl of exactly maxAge plus twice the allowance, and any ttl without maxAge", () => {
    expect(() =>
      webhookHandler({ secret: SECRET, maxAge: "5m", dedupe: { store, ttl: "7m" }, onEvent: quiet }),
    ).not.toThrow();
    expect(() => webhookHandler({ secret: SECRET, dedupe: { store, ttl: "1m" }, onEvent: quiet })).not.toThrow();
  });
});

const availability = redisAvailability();
describe.skipIf(!availability.available)(
  `Redis failing between claim and complete (item 5)${availability.available ? "" : ` (skipped: ${availability.reason})`}`,
  () => {
    let server: RedisServer;
    let client: Redis;
    beforeAll(async () => {
      server = await startRedis();
      // No offline queue: a command sent while Redis is down fails at once instead of waiting for
      // the reconnection (node-redis with disableOfflineQueue, or a connection lost mid-command).
      client = new Redis(server.url, { retryStrategy: () => 50, enableOfflineQueue: false });
      client.on("error", quiet);
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
      const store = new RedisDedupeStore(client, { scope: "fail-closed", prefix: "fail-closed:" });
      let runs = 0;
      const handler = webhookHandler({
        secret: SECRET,
        dedupe: { store, ttl: 60_000, timeout: 3000 },
        onError: quiet,
        onEvent: async () => {
          runs++;
          // Redis dies while the handler works, and comes back a moment later.
          await server.stop(true);
          setTimeout(() => void server.restart(), 400);
        },
      });
      const d = request();
      expect((await handler(d.make())).status).toBe(204);
      // The id was marked done after Redis came back: a later copy is a duplicate, not a second run.
      const again = await handler(d.make());
      expect([again.status, again.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
      expect(runs).toBe(1);
    });

    it("reports, and still answers 204, when Redis stays down past dedupe.timeout (the documented window)", async () => {
      const store = new RedisDedupeStore(client, { scope: "fail-closed-down" });
      const onError = vi.fn();
      const handler = webhookHandler({
        secret: SECRET,
        dedupe: { store, ttl: 60_000, timeout: 300 },
        onError,
        onEvent: async () => {
          await server.stop(true);
        },
      });
      expect((await handler(request().make())).status).toBe(204);
      expect(onError).toHaveBeenCalled();
      await server.restart();
      await sleep(100);
    });
  },
);
