import fc from "fast-check";
import { type KnownWebhookEvent, RedisDedupeStore, RedisOrderStore, type WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
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

/**
 * The client, with each request it sends counted: what a store costs in round trips (Redis's own
 * INFO commandstats counts the commands a script runs as well as the script).
 */
function counted(): { client: { call(command: string, ...args: string[]): Promise<unknown> }; sent: () => number } {
  let sent = 0;
  return {
    sent: () => sent,
    client: {
      call(command, ...args) {
        sent++;
        return client.call(command, ...args);
      },
    },
  };
}

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

  it("gives the in-order state with dedupe on the same client too, the hold taken in the claim's script (500 runs of up to 5 events)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(5), async (history) => {
        await checkHistory(history, async (delivered) => {
          const seen: WebhookEvent[] = [];
          const scope = `paired-${++runs}`;
          const handle = webhookHandler({
            secret: SECRET,
            dedupe: { store: new RedisDedupeStore(client, { scope }), ttl: "1h" },
            order: { store: new RedisOrderStore(client, { scope }) },
            onEvent: async (event) => {
              await new Promise((resolve) => setImmediate(resolve));
              seen.push(event);
            },
          });
          // A copy that arrives while the first runs is answered 409 and sent again, as a sender retries.
          const send = async (event: KnownWebhookEvent): Promise<number> => {
            const { status } = await handle(await signedRequest({ secret: SECRET, event }));
            return status === 409 ? send(event) : status;
          };
          expect(await Promise.all(delivered.map(send))).toEqual(delivered.map(() => 204));
          return seen;
        });
      }),
      { numRuns: propertyRuns(500) },
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
    expect(await client.pttl("flag-webhooks:order:hold:{alpha}:flag")).toBeGreaterThan(86_000_000);
  });

  it("costs one command more per delivery than dedupe alone, with the dedupe store on the same client: the hold is taken in the claim's script", async () => {
    const deliveries = (run: string) =>
      Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          signedRequest({
            secret: SECRET,
            event: createEvent("flag.updated", {
              id: `evt_${run}_${i}`,
              data: { flag: `flag-${i}`, changes: [{ path: "on", from: false, to: true }] },
            }),
          }),
        ),
      );
    const receiver = (scope: string, order: boolean) => {
      const { client: wire, sent } = counted();
      const handle = webhookHandler({
        secret: SECRET,
        dedupe: { store: new RedisDedupeStore(wire, { scope }), ttl: "1h" },
        ...(order && { order: { store: new RedisOrderStore(wire, { scope }) } }),
        onEvent: () => {},
      });
      return { handle, sent };
    };
    const plain = receiver("trips-plain", false);
    const ordered = receiver("trips-ordered", true);
    for (const request of await deliveries("plain")) expect((await plain.handle(request)).status).toBe(204);
    for (const request of await deliveries("ordered")) expect((await ordered.handle(request)).status).toBe(204);
    // The claim and the done mark; then the claim with the hold, the commit and the done mark.
    expect(plain.sent()).toBe(40);
    expect(ordered.sent()).toBe(60);
  });

  it("sends nothing while a delivery waits for a flag this process holds, and hands it over when the holder commits", async () => {
    const { client: wire, sent } = counted();
    const store = new RedisOrderStore(wire, { scope: "waits-here" });
    const first = await store.hold("alpha", 60_000);
    const next = store.hold("alpha", 60_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await first.commit({ fields: { a: "x" } });
    const taken = await next;
    expect(taken.positions).toEqual({ fields: { a: "x" } });
    await taken.release();
    // The first hold, the waiting hold's first try, the commit, the hold once woken, its release.
    expect(sent()).toBe(5);
  });

  it("looks again at another instance's hold after a pause that doubles, not every 10 ms", async () => {
    const first = await new RedisOrderStore(client, { scope: "waits-there" }).hold("alpha", 60_000);
    const { client: wire, sent } = counted();
    let taken: Awaited<ReturnType<RedisOrderStore["hold"]>> | undefined;
    const next = new RedisOrderStore(wire, { scope: "waits-there" }).hold("alpha", 60_000).then((hold) => {
      taken = hold;
    });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(taken).toBeUndefined();
    await first.release();
    await next;
    // Tries at 0, 10, 30, 70, 150, 310 and 560 ms at most (a busy machine makes fewer), then the
    // one that holds, at most 250 ms after the release: a 10 ms poll made some 60.
    expect(sent()).toBeLessThanOrEqual(8);
    await taken?.release();
  });
});
