import fc from "fast-check";
import { type KnownWebhookEvent, RedisOrderStore, type WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { signedRequest } from "flag-webhooks/testing";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, histories, propertyRuns } from "../../support/order.js";
import { SECRET } from "../../support/receiver.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../../support/redis-server.js";

// Order on Redis: a real redis-server on loopback (test/support/redis-server.ts), through ioredis.

const availability = redisAvailability();
let server: RedisServer | undefined;
let client: Redis;
beforeAll(async () => {
  if (!availability.available) return;
  server = await startRedis();
  client = new Redis(server.url);
});
afterAll(async () => {
  await client?.quit();
  await stopRedis(server);
});

let runs = 0;
describe.skipIf(!availability.available)("RedisOrderStore", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once (1,000 runs of up to 5 events)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(5), async (history) => {
        await checkHistory(history, async (delivered) => {
          const seen: WebhookEvent[] = [];
          const store = new RedisOrderStore(client, { scope: `run-${++runs}` });
          const handle = webhookHandler({
            secret: SECRET,
            order: { store },
            onEvent: async (event) => {
              await new Promise((resolve) => setImmediate(resolve));
              seen.push(event);
            },
          });
          const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
          const answers = await Promise.all(delivered.map(send));
          expect(answers.map((answer) => answer.status)).toEqual(delivered.map(() => 204));
          return seen;
        });
      }),
      { numRuns: propertyRuns(1000) },
    );
  }, 120_000);

  it("keeps a flag held until the delivery is decided, takes over a lease that ran out, and refuses its late commit", async () => {
    const store = new RedisOrderStore(client, { scope: "hold" });
    const first = await store.hold("alpha", 200);
    let second = false;
    const next = store.hold("alpha", 60_000).then((hold) => {
      second = true;
      return hold;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(second).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const taken = await next;
    await expect(first.commit({ fields: { a: "late" } })).rejects.toThrow(/ran out/);
    await taken.commit({ fields: { a: "x" } });
    const again = await store.hold("alpha", 1000);
    expect(again.positions).toEqual({ fields: { a: "x" } });
    await again.release();
    expect(await client.pttl("flag-webhooks:order:hold:flag:alpha")).toBeGreaterThan(86_000_000);
  });
});
