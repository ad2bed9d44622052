import { setTimeout as sleep } from "node:timers/promises";
import { RedisDedupeStore, RedisOrderStore, STALE_HEADER } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { SECRET } from "../../support/receiver.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../../support/redis-server.js";

// Attack: Redis killed (SIGKILL) and restarted while a delivery holds its flag, with the paired
// claim on one client. With AOF (appendfsync always) the lock and the positions come back: the
// holder's commit lands after the client reconnects, and an older event is still stale. Without
// persistence both are forgotten, and an older event that arrives after the restart is applied
// over the newer value: the Redis page says so of handled ids, docs/order.md not of positions.

const availability = redisAvailability();
const servers: RedisServer[] = [];
const clients: Redis[] = [];
afterAll(async () => {
  for (const client of clients) client.disconnect();
  for (const server of servers) await stopRedis(server);
});

const update = (id: string, second: number, to: number) =>
  createEvent("flag.updated", {
    id,
    createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, second)).toISOString(),
    data: { flag: "checkout", changes: [{ path: "rollout.percent", from: null, to }] },
  });

async function restartMidHold(persistent: boolean) {
  const server = await startRedis(persistent ? ["--appendonly", "yes", "--appendfsync", "always"] : []);
  servers.push(server);
  const client = new Redis(server.url, { maxRetriesPerRequest: null });
  clients.push(client);
  const applied: number[] = [];
  let gate: Promise<void> | undefined;
  const handle = webhookHandler({
    secret: SECRET,
    dedupe: { store: new RedisDedupeStore(client, { scope: "restart", timeout: "10s" }), ttl: "1h" },
    order: { store: new RedisOrderStore(client, { scope: "restart" }) },
    onEvent: async (event) => {
      await gate;
      applied.push((event.data as { changes: { to: number }[] }).changes[0]?.to as number);
    },
  });
  const send = async (event: ReturnType<typeof update>) => handle(await signedRequest({ secret: SECRET, event }));
  expect((await send(update("evt_2", 2, 20))).status).toBe(204);
  let open = () => {};
  gate = new Promise((resolve) => {
    open = resolve;
  });
  const held = send(update("evt_3", 3, 30));
  await sleep(200);
  await server.stop(true);
  await server.restart();
  open();
  const heldStatus = (await held).status;
  gate = undefined;
  const late = await send(update("evt_1", 1, 10));
  return { heldStatus, lateStale: late.headers.get(STALE_HEADER), applied };
}

describe.skipIf(!availability.available)("Redis restarted while a delivery holds its flag", () => {
  it("with AOF: the holder's commit lands after the restart (204) and an older event is stale", async () => {
    const { heldStatus, lateStale, applied } = await restartMidHold(true);
    expect(heldStatus).toBe(204);
    expect(lateStale).toBe("true");
    expect(applied).toEqual([20, 30]);
  }, 30_000);

  it("without persistence: the positions are forgotten and an older event is applied over the newer value", async () => {
    const { heldStatus, lateStale, applied } = await restartMidHold(false);
    // The lock is gone: the holder's commit is refused as a lapsed hold, 503, its effect applied.
    expect(heldStatus).toBe(503);
    expect(lateStale).toBeNull();
    expect(applied.at(-1)).toBe(10);
  }, 30_000);
});
