import { randomUUID } from "node:crypto";
import type { OrderStore } from "flag-webhooks";
import { type DedupeNamespace, DurableObjectOrderStore } from "flag-webhooks/cloudflare";
import { DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker } from "../../support/cloudflare-bundle.js";
import { type Dynalite, startDynalite, stopDynalite } from "../../support/dynalite.js";
import { SECRET } from "../../support/receiver.js";

// Attack: a flag whose record of positions outgrows what its backend keeps as one value
// (DynamoDB's 400 KB item, an OrderObject's storage value: SQLITE_TOOBIG at about 2 MB in
// workerd). A flag with many fields (per-user targets, many rules) grows its record with every
// new path, and nothing prunes a field's position while the flag keeps changing.

let db: Dynalite;
let mf: Miniflare;
let order: DedupeNamespace;
beforeAll(async () => {
  db = await startDynalite();
  mf = await startWorker("test/fixtures/cloudflare/objects.ts", {
    durableObjects: { DEDUPE: "TestDedupeObject", ODD: "OddObject", ORDER: "TestOrderObject" },
  });
  order = await mf.getDurableObjectNamespace("ORDER");
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
  await stopDynalite(db);
});

/** A receiver ordering on `store`, giving up on a held flag after 1 s, and its handler's runs. */
function receiver(store: OrderStore) {
  let runs = 0;
  const handle = webhookHandler({ secret: SECRET, order: { store, timeout: "1s" }, onEvent: () => void runs++ });
  /** Event `n` of flag "wide", changing `paths` paths of `length` chars (each new unless `prefix` repeats one). */
  const send = async (n: number, paths: number, length: number, prefix = `p${n}`) => {
    const changes = Array.from({ length: paths }, (_, i) => ({
      path: `${prefix}.${i}.`.padEnd(length, "x"),
      from: 0,
      to: 1,
    }));
    const event = createEvent("flag.updated", {
      id: `evt_${n}`,
      createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, n)).toISOString(),
      data: { flag: "wide", changes },
    });
    return (await handle(await signedRequest({ secret: SECRET, event }))).status;
  };
  return { send, runs: () => runs };
}

/** Sends events 0..count-1, each adding `paths` new paths, and answers their statuses. */
async function fill(send: ReturnType<typeof receiver>["send"], count: number, paths: number, length: number) {
  const statuses: number[] = [];
  for (let n = 0; n < count; n++) statuses.push(await send(n, paths, length));
  return statuses;
}

const dynamo = () =>
  new DynamoDBOrderStore(db.client(), { table: db.table, scope: `wide-${randomUUID().slice(0, 8)}` });
const object = () => new DurableObjectOrderStore(order, { scope: `wide-${randomUUID().slice(0, 8)}` });

describe("a flag's positions past the backend's largest value", () => {
  // 9 events of 100 new paths of 400 chars fill about 380 KB of the item; the 10th (paths 901 to
  // 1,000) takes the record past 400 KB. Its commit failed (ValidationException), it was answered
  // 503 after its handler ran, and so was every retry and every later event adding a path, for as
  // long as the item lived. Now a record past one item is kept in parts (items of their own,
  // named by the flag's item), read back whole by the next hold.
  it("DynamoDB: the event that adds paths 901-1,000 to a flag of 900 long paths is handled", async () => {
    const { send } = receiver(dynamo());
    expect(await fill(send, 9, 100, 400)).toEqual(Array(9).fill(204));
    expect(await send(9, 100, 400)).toBe(204);
  }, 60_000);

  // And the record kept in parts is the whole of it: a late change to a path of the last event is
  // stale (its handler not run), and a newer change to a path of the first event is applied.
  it("DynamoDB: a flag's record past one item is read back whole by the next delivery", async () => {
    const { send, runs } = receiver(dynamo());
    expect(await fill(send, 10, 100, 400)).toEqual(Array(10).fill(204));
    expect(await send(0, 1, 400, "p9")).toBe(204);
    expect(runs()).toBe(10);
    expect(await send(11, 1, 400, "p0")).toBe(204);
    expect(runs()).toBe(11);
  }, 60_000);

  // The same on an OrderObject: 250 paths of 8,000 chars (about 2 MB) fit in one storage value;
  // the event adding more was refused by workerd's SQLite (SQLITE_TOOBIG), answered 503 with its
  // handler run, for ever. Fixed: positions too long for one value are split over keys of their
  // own, written with the record in one atomic put.
  it("Durable Objects: the event that takes a flag's record past about 2 MB is handled, and so is the next one", async () => {
    const { send, runs } = receiver(object());
    expect(await fill(send, 10, 25, 8000)).toEqual(Array(10).fill(204));
    expect(await send(10, 25, 8000)).toBe(204);
    expect(await send(11, 1, 8000, "p0")).toBe(204);
    expect(runs()).toBe(12);
  }, 60_000);

  it("Durable Objects: a record split over parts reads back whole, and the parts it no longer needs go when it shrinks", async () => {
    const scope = `wide-${randomUUID().slice(0, 8)}`;
    const store = new DurableObjectOrderStore(order, { scope, shards: 1 });
    const stub = order.get(order.idFromName(`${scope}:0`) as never) as unknown as {
      fetch(url: string): Promise<Response>;
    };
    const parts = async () =>
      ((await (await stub.fetch("https://object/__keys")).json()) as string[]).filter((key) => key.startsWith("part:"));
    const wide = { fields: { on: "x".repeat(3_000_000) } };
    await (await store.hold("wide", 60_000)).commit(wide as never);
    expect(await parts()).toHaveLength(12);
    const again = await store.hold("wide", 60_000);
    expect(again.positions).toEqual(wide);
    await again.commit({ fields: { on: "x".repeat(600_000) } } as never);
    expect(await parts()).toHaveLength(3);
    await (await store.hold("wide", 60_000)).commit({ fields: { on: "x" } } as never);
    expect(await parts()).toEqual([]);
  }, 60_000);
});
