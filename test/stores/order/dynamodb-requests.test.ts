import { randomUUID } from "node:crypto";
import { DynamoDBDedupeStore, DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedClient, type Dynalite, startDynalite, stopDynalite } from "../../support/dynalite.js";
import { SECRET } from "../../support/receiver.js";

// What `order` costs on DynamoDB in requests, counted on the real SDK (a middleware on the
// client's stack, which sees each command once, whatever the SDK retries) against dynalite:
// the figures docs/order.md gives, so a change that adds a request shows here. dynalite has no
// TransactWriteItems: these are the figures without transactions (with them, on DynamoDB Local:
// dynamodb-local.test.ts).

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

/**
 * The requests of each delivery of `count` fresh events (each of its own flag unless `oneFlag`),
 * with and without `order` (its store told there are no transactions, unless `transactions`).
 */
async function perDelivery(order: boolean, count: number, oneFlag = false, transactions = false): Promise<number[]> {
  const scope = `count-${randomUUID().slice(0, 8)}`;
  const { client, sent } = countedClient(db);
  const handle = webhookHandler({
    secret: SECRET,
    dedupe: { store: new DynamoDBDedupeStore(client, { table: db.table, scope }), ttl: "1h" },
    ...(order && { order: { store: new DynamoDBOrderStore(client, { table: db.table, scope, transactions }) } }),
    onEvent: () => {},
  });
  const each: number[] = [];
  for (let n = 0; n < count; n++) {
    const event = createEvent("flag.updated", {
      createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, n)).toISOString(),
      data: { flag: oneFlag ? "checkout" : `flag-${n}`, changes: [{ path: "on", from: false, to: n % 2 === 0 }] },
    });
    const before = sent();
    expect((await handle(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    expect(await db.item(`${scope}#${event.id}`)).toMatchObject({ state: { S: "done" } });
    each.push(sent() - before);
  }
  return each;
}

describe("DynamoDB requests per delivery", () => {
  it("dedupe alone: 2 (the claim, the done mark)", async () => {
    expect(await perDelivery(false, 10)).toEqual(Array(10).fill(2));
  });

  it("with order and no transactions: 2 more (the hold that reads the positions, the commit that writes them and ends the hold), on new flags and on one flag alike", async () => {
    expect(await perDelivery(true, 10)).toEqual(Array(10).fill(4));
    expect(await perDelivery(true, 10, true)).toEqual(Array(10).fill(4));
  });

  it("with transactions on (the default), a store finds out from its first delivery that dynalite has none: that one costs 1 more (the refused TransactWriteItems), the next ones 4", async () => {
    expect(await perDelivery(true, 5, false, true)).toEqual([5, 4, 4, 4, 4]);
  });

  it("without transactions found out at a failed handler's release, the hold and the claim are freed apart: the retry runs the handler", async () => {
    const scope = `count-${randomUUID().slice(0, 8)}`;
    const client = db.client();
    let runs = 0;
    const handle = webhookHandler({
      secret: SECRET,
      dedupe: { store: new DynamoDBDedupeStore(client, { table: db.table, scope }), ttl: "1h" },
      order: { store: new DynamoDBOrderStore(client, { table: db.table, scope }) },
      onEvent: () => {
        if (++runs === 1) throw new Error("the mirror is down");
      },
    });
    const event = createEvent("flag.updated", {
      data: { flag: "dark-mode", changes: [{ path: "on", from: false, to: true }] },
    });
    expect((await handle(await signedRequest({ secret: SECRET, event }))).status).toBe(500);
    expect(await db.item(`${scope}#${event.id}`)).toBeUndefined();
    expect((await db.item(`order:${scope}#dark-mode`))?.holder).toBeUndefined();
    expect((await handle(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    expect(runs).toBe(2);
  });
});
