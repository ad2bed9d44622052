import fc from "fast-check";
import { type KnownWebhookEvent, RedisDedupeStore, RedisOrderStore, type WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { signedRequest } from "flag-webhooks/testing";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, deliverThrough, histories, propertyRuns } from "../../support/order.js";
import { SECRET } from "../../support/receiver.js";
import { type RedisCluster, startRedisCluster, stopRedisCluster } from "../../support/redis-cluster.js";
import { redisAvailability } from "../../support/redis-server.js";

// Order on a real Redis Cluster (three masters on loopback, test/support/redis-cluster.ts) through
// ioredis's Cluster client, which sends each command to the node that owns its keys' hash slot: a
// script whose keys fall in two slots is refused there (CROSSSLOT).

const availability = redisAvailability();
let cluster: RedisCluster | undefined;
let client: Cluster;
beforeAll(async () => {
  if (!availability.available) return;
  cluster = await startRedisCluster();
  client = new Cluster(cluster.nodes);
}, 60_000);
afterAll(async () => {
  await client?.quit();
  await stopRedisCluster(cluster);
});

let runs = 0;
describe.skipIf(!availability.available)("RedisOrderStore on Redis Cluster", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once to two instances: a flag's lock and positions share a slot (100 runs)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(5), async (history) => {
        const scope = `cluster-${++runs}`;
        const stores = [0, 1].map(() => new RedisOrderStore(client, { scope }));
        await checkHistory(history, (delivered) => deliverThrough(stores, delivered));
      }),
      { numRuns: propertyRuns(100) },
    );
  }, 120_000);

  it("orders with a RedisDedupeStore on the same Cluster client too: the claim and the hold, whose keys are in different slots, are not one script there (100 runs)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(5), async (history) => {
        const scope = `cluster-paired-${++runs}`;
        const dedupe = new RedisDedupeStore(client, { scope });
        const order = new RedisOrderStore(client, { scope });
        expect(order.pairedClaim(dedupe)).toBeUndefined();
        await checkHistory(history, async (delivered) => {
          const seen: WebhookEvent[] = [];
          const handlers = [0, 1].map(() =>
            webhookHandler({
              secret: SECRET,
              dedupe: { store: new RedisDedupeStore(client, { scope }), ttl: "1h" },
              order: { store: new RedisOrderStore(client, { scope }) },
              onEvent: async (event) => {
                await new Promise((resolve) => setImmediate(resolve));
                seen.push(event);
              },
            }),
          );
          // A copy answered 409 while the first runs is sent again, as a sender retries.
          const send = async (event: KnownWebhookEvent, i: number): Promise<number> => {
            const handle = handlers[i % 2] as (typeof handlers)[number];
            const { status } = await handle(await signedRequest({ secret: SECRET, event }));
            return status === 409 ? send(event, i) : status;
          };
          expect(await Promise.all(delivered.map(send))).toEqual(delivered.map(() => 204));
          return seen;
        });
      }),
      { numRuns: propertyRuns(100) },
    );
  }, 120_000);

  it("still takes the hold in the claim's script on a single server (the pairing is left off for a cluster only)", async () => {
    const single = new Redis(cluster?.nodes[0]?.port as number, "127.0.0.1", { lazyConnect: true });
    const scope = "single";
    expect(new RedisOrderStore(single, { scope }).pairedClaim(new RedisDedupeStore(single, { scope }))).toBeTypeOf(
      "function",
    );
    single.disconnect();
  });
});
