import { randomUUID } from "node:crypto";
import { type OrderStore, STALE_HEADER } from "flag-webhooks";
import { DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "../../support/dynalite.js";
import { assertHistoriesAtOnce, checkHistory, deliverThrough } from "../../support/order.js";
import { SECRET } from "../../support/receiver.js";

// DynamoDBOrderStore against dynalite (the DynamoDB API, served from this process on a free
// loopback port), on the dedupe table: two stores on two clients are two instances of one endpoint.

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

const newScope = () => `order-${randomUUID().slice(0, 8)}`;
const store = (scope: string, retention?: number) =>
  new DynamoDBOrderStore(db.client(), { table: db.table, scope, ...(retention && { retention }) });

describe("DynamoDBOrderStore on dynalite", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once to two instances (1,000 runs of up to 5 events)", async () => {
    // Two clients for the whole test: a client per run would leave hundreds of sockets open.
    const clients = [db.client(), db.client()];
    await assertHistoriesAtOnce(1000, 5, async (history) => {
      const scope = newScope();
      // A request's bound as long as the wait for a flag (test/support/order-delivery.ts): eight
      // histories at once on a loaded 2-core machine kept dynalite's requests past the default 2 s.
      const stores = clients.map(
        (client) => new DynamoDBOrderStore(client, { table: db.table, scope, timeout: "60s" }),
      );
      await checkHistory(history, (delivered) => deliverThrough(stores, delivered));
    });
  }, 600_000);

  it("keeps a flag held by one instance until its delivery is decided, lets another take over a lease that ran out, and refuses the late commit", async () => {
    const scope = newScope();
    const [one, two] = [store(scope), store(scope)];
    const first = await one.hold("alpha", 300);
    let second = false;
    const next = two.hold("alpha", 60_000).then((hold) => {
      second = true;
      return hold;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(second).toBe(false);
    const taken = await next;
    await expect(first.commit({ fields: { a: "late" } })).rejects.toThrow(/ran out/);
    await taken.commit({ fields: { a: "x" } });
    const again = await one.hold("alpha", 1000);
    expect(again.positions).toEqual({ fields: { a: "x" } });
    await again.release();
  });

  it("lets the next delivery of a flag in, with the new positions, once the one holding it commits", async () => {
    const scope = newScope();
    const [one, two] = [store(scope), store(scope)];
    const first = await one.hold("alpha", 60_000);
    const next = two.hold("alpha", 60_000);
    await first.commit({ fields: { a: "x" } });
    const taken = await next;
    expect(taken.positions).toEqual({ fields: { a: "x" } });
    await taken.release();
  });

  it("keeps a flag's positions in one item, order:<scope>#<flag>, that DynamoDB's TTL deletes a retention after its last write", async () => {
    const scope = newScope();
    const before = Date.now();
    const hold = await store(scope, 3_600_000).hold("dark-mode", 60_000);
    await hold.commit({ fields: { a: "x" } });
    const item = (await db.item(`order:${scope}#dark-mode`)) as Record<string, { S?: string; N?: string }>;
    expect(JSON.parse(item.positions?.S ?? "null")).toEqual({ fields: { a: "x" } });
    expect(item.holder).toBeUndefined();
    const seconds = Number(item.expiresAt?.N);
    expect(seconds).toBeGreaterThanOrEqual(Math.floor((before + 3_600_000) / 1000));
    expect(seconds).toBeLessThanOrEqual(Math.ceil((Date.now() + 3_600_000) / 1000));
  });

  it("records a position only once its handler succeeded: after a failed newer event an older one is still applied", async () => {
    const order: OrderStore = store(newScope());
    let fail = true;
    const seen: string[] = [];
    const handle = webhookHandler({
      secret: SECRET,
      order: { store: order },
      onEvent: (event) => {
        if (fail && event.id === "evt_new") throw new Error("the mirror is down");
        seen.push(event.id);
      },
    });
    const update = (id: string, createdAt: string) =>
      createEvent("flag.updated", {
        id,
        createdAt,
        data: { flag: "dark-mode", changes: [{ path: "on", from: false, to: true }] },
      });
    const send = async (id: string, createdAt: string) =>
      handle(await signedRequest({ secret: SECRET, event: update(id, createdAt) }));
    expect((await send("evt_new", "2026-11-21T09:02:00Z")).status).toBe(500);
    expect((await send("evt_old", "2026-11-21T09:01:00Z")).status).toBe(204);
    fail = false;
    expect((await send("evt_new", "2026-11-21T09:02:00Z")).status).toBe(204);
    const late = await send("evt_older", "2026-11-21T09:00:00Z");
    expect(late.headers.get(STALE_HEADER)).toBe("true");
    expect(seen).toEqual(["evt_old", "evt_new"]);
  });

  it("refuses a client that is none and a table name that is none", () => {
    expect(() => new DynamoDBOrderStore({} as never, { table: db.table, scope: "a" })).toThrow(TypeError);
    expect(() => new DynamoDBOrderStore(db.client(), { table: "", scope: "a" })).toThrow(/table/);
    expect(() => new DynamoDBOrderStore(db.client(), { table: db.table, scope: "a:b" })).toThrow(/scope/);
  });
});
