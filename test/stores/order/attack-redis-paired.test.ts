import { setTimeout as sleep } from "node:timers/promises";
import { RedisDedupeStore, RedisOrderStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SECRET } from "../../support/receiver.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../../support/redis-server.js";

// Attack on the Redis paired claim (RedisDedupeStore's claim and RedisOrderStore's hold in one
// script on one client), against a real redis-server: a claim that lands while the hold is
// refused, a reply that comes back after the receiver gave up (Redis paused with CLIENT PAUSE),
// and the id's lease running out mid-delivery. Each held; kept as tests.

const availability = redisAvailability();
let server: RedisServer | undefined;
let client: Redis;
let admin: Redis;
beforeAll(async () => {
  if (!availability.available) return;
  server = await startRedis();
  client = new Redis(server.url);
  admin = new Redis(server.url);
});
afterAll(async () => {
  await client?.quit();
  await admin?.quit();
  await stopRedis(server);
});

let scopes = 0;
const update = (id: string, second: number, to: number) =>
  createEvent("flag.updated", {
    id,
    createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, second)).toISOString(),
    data: { flag: "checkout", changes: [{ path: "rollout.percent", from: null, to }] },
  });

/** A receiver on the shared client, both stores in one scope; its handler's runs by event id. */
function receiver(options: { timeout?: string; orderTimeout?: string; inFlightTtl?: string; lease?: string } = {}) {
  const scope = `paired-attack-${++scopes}`;
  const runs: string[] = [];
  const gates = new Map<string, Promise<void>>();
  const handle = webhookHandler({
    secret: SECRET,
    dedupe: {
      store: new RedisDedupeStore(client, { scope, ...(options.timeout && { timeout: options.timeout }) }),
      ttl: "1h",
      ...(options.inFlightTtl && { inFlightTtl: options.inFlightTtl }),
    },
    order: {
      store: new RedisOrderStore(client, { scope }),
      ...(options.orderTimeout && { timeout: options.orderTimeout }),
      ...(options.lease && { lease: options.lease }),
    },
    onEvent: async (event) => {
      runs.push(event.id);
      await gates.get(event.id);
    },
  });
  const send = async (event: ReturnType<typeof update>) => handle(await signedRequest({ secret: SECRET, event }));
  return { handle, send, runs, gates, scope };
}

const open = () => {
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { gate, release };
};

describe.skipIf(!availability.available)("the Redis paired claim under attack", () => {
  it("a claim that lands while its flag is held, then gives up waiting (503), frees its id: the retry once the flag is free is handled, once", async () => {
    const r = receiver({ orderTimeout: "300ms" });
    const first = open();
    r.gates.set("evt_a", first.gate);
    const a = r.send(update("evt_a", 2, 50));
    await sleep(100);
    expect((await r.send(update("evt_b", 1, 10))).status).toBe(503);
    first.release();
    expect((await a).status).toBe(204);
    const retry = await r.send(update("evt_b", 1, 10));
    // Older than evt_a: stale, answered 204 with the header and not run; never 409.
    expect(retry.status).toBe(204);
    expect(retry.headers.get("webhook-stale")).toBe("true");
    expect(r.runs).toEqual(["evt_a"]);
  });

  it("a paired claim whose reply comes after the store gave up (Redis paused) leaves neither the id nor the flag held: the retry is handled at once", async () => {
    const r = receiver({ timeout: "200ms" });
    await admin.call("CLIENT", "PAUSE", "1000", "WRITE");
    expect((await r.send(update("evt_p", 1, 10))).status).toBe(503);
    await sleep(1200);
    expect((await r.send(update("evt_p", 1, 10))).status).toBe(204);
    expect((await r.send(update("evt_q", 2, 20))).status).toBe(204);
    expect(r.runs).toEqual(["evt_p", "evt_q"]);
    expect(await client.keys(`flag-webhooks:order:${r.scope}:lock:*`)).toEqual([]);
  });

  it("a copy whose claim's lease ran out while the first runs waits for the flag, and is then stale: one run", async () => {
    const r = receiver({ inFlightTtl: "200ms" });
    const first = open();
    r.gates.set("evt_c", first.gate);
    const a = r.send(update("evt_c", 1, 10));
    await sleep(400);
    const copy = r.send(update("evt_c", 1, 10));
    await sleep(100);
    first.release();
    const statuses = [(await a).status, (await copy).status];
    expect(r.runs).toEqual(["evt_c"]);
    expect(statuses).toEqual([204, 204]);
  });
});
