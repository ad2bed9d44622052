import { type KnownWebhookEvent, STALE_HEADER, type WebhookEvent } from "flag-webhooks";
import { type DedupeNamespace, DurableObjectOrderStore } from "flag-webhooks/cloudflare";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedDelivery, signedRequest } from "flag-webhooks/testing";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker } from "../../support/cloudflare-bundle.js";
import { assertHistoriesAtOnce, checkHistory } from "../../support/order.js";
import { SECRET } from "../../support/receiver.js";

// DurableObjectOrderStore in Node over a REAL namespace of OrderObjects running in workerd
// (miniflare's getDurableObjectNamespace() proxies each request to them): two stores of one
// scope are two Workers of one endpoint. The property test delivers inside workerd instead
// (the fixture's /order/deliver), where Workers reach the objects as in production: through
// miniflare's proxy each request to an object cost Node about 11 ms of CPU, and a history's
// deliveries now cost one request from Node.

let mf: Miniflare;
let order: DedupeNamespace;
beforeAll(async () => {
  mf = await startWorker("test/fixtures/cloudflare/objects.ts", {
    durableObjects: { DEDUPE: "TestDedupeObject", ODD: "OddObject", ORDER: "OrderObject" },
  });
  order = await mf.getDurableObjectNamespace("ORDER");
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

let scopes = 0;
const newScope = () => `order-${++scopes}`;

/** The namespace, with each request to an object counted. */
function counted(): { namespace: DedupeNamespace; requests: () => number } {
  let requests = 0;
  return {
    requests: () => requests,
    namespace: {
      idFromName: (name) => order.idFromName(name),
      get(id) {
        const stub = order.get(id);
        return {
          fetch(url, init) {
            requests++;
            return stub.fetch(url, init);
          },
        };
      },
    },
  };
}

/**
 * Delivers `delivered` all at once to two Workers of one endpoint inside workerd, each ordering
 * on its own DurableObjectOrderStore of `scope` (test/support/order-delivery.ts); every answer
 * must be 204. Returns what the handlers saw, in the order they finished.
 */
async function deliverInWorkers(scope: string, delivered: KnownWebhookEvent[]): Promise<WebhookEvent[]> {
  const deliveries = await Promise.all(delivered.map((event) => signedDelivery({ secret: SECRET, event })));
  const response = await mf.dispatchFetch("http://localhost/order/deliver", {
    method: "POST",
    body: JSON.stringify({ secret: SECRET, scope, instances: 2, shards: 2, deliveries }),
  });
  const { statuses, seen } = (await response.json()) as { statuses: number[]; seen: WebhookEvent[] };
  expect(statuses).toEqual(delivered.map(() => 204));
  return seen;
}

describe("DurableObjectOrderStore over OrderObjects in workerd", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once to two Workers (1,000 runs of up to 5 events)", async () => {
    await assertHistoriesAtOnce(1000, 5, async (history) => {
      const scope = newScope();
      await checkHistory(history, (delivered) => deliverInWorkers(scope, delivered));
    });
  }, 600_000);

  it("makes a delivery that finds its flag held wait inside the object, one request, until the holder commits", async () => {
    const scope = newScope();
    const { namespace, requests } = counted();
    const [one, two] = [0, 1].map(() => new DurableObjectOrderStore(namespace, { scope }));
    const first = await (one as DurableObjectOrderStore).hold("alpha", 60_000);
    let second = false;
    const next = (two as DurableObjectOrderStore).hold("alpha", 60_000).then((hold) => {
      second = true;
      return hold;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(second).toBe(false);
    await first.commit({ fields: { a: "x" } });
    const taken = await next;
    expect(taken.positions).toEqual({ fields: { a: "x" } });
    // The first hold, the waiting hold, the commit: no polling while it waited.
    expect(requests()).toBe(3);
    await taken.release();
  });

  it("lets another Worker take over a hold whose lease ran out, and refuses the late commit", async () => {
    const scope = newScope();
    const [one, two] = [0, 1].map(() => new DurableObjectOrderStore(order, { scope }));
    const first = await (one as DurableObjectOrderStore).hold("alpha", 200);
    const taken = await (two as DurableObjectOrderStore).hold("alpha", 60_000);
    await expect(first.commit({ fields: { a: "late" } })).rejects.toThrow(/ran out/);
    await taken.commit({ fields: { a: "x" } });
    const again = await (one as DurableObjectOrderStore).hold("alpha", 1000);
    expect(again.positions).toEqual({ fields: { a: "x" } });
    await again.release();
  });

  it("records a position only once its handler succeeded: after a failed newer event an older one is still applied", async () => {
    const store = new DurableObjectOrderStore(order, { scope: newScope() });
    let fail = true;
    const seen: string[] = [];
    const handle = webhookHandler({
      secret: SECRET,
      order: { store },
      onEvent: (event) => {
        if (fail && event.id === "evt_new") throw new Error("the mirror is down");
        seen.push(event.id);
      },
    });
    const send = async (id: string, createdAt: string) => {
      const event = createEvent("flag.updated", {
        id,
        createdAt,
        data: { flag: "dark-mode", changes: [{ path: "on", from: false, to: true }] },
      });
      return handle(await signedRequest({ secret: SECRET, event }));
    };
    expect((await send("evt_new", "2026-11-21T09:02:00Z")).status).toBe(500);
    expect((await send("evt_old", "2026-11-21T09:01:00Z")).status).toBe(204);
    fail = false;
    expect((await send("evt_new", "2026-11-21T09:02:00Z")).status).toBe(204);
    expect((await send("evt_older", "2026-11-21T09:00:00Z")).headers.get(STALE_HEADER)).toBe("true");
    expect(seen).toEqual(["evt_old", "evt_new"]);
  });

  it("refuses a binding that is none, and shards out of range", () => {
    expect(() => new DurableObjectOrderStore({} as never, { scope: "a" })).toThrow(TypeError);
    expect(() => new DurableObjectOrderStore(order, { scope: "a", shards: 0 })).toThrow(/shards/);
  });
});
