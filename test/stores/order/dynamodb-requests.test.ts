import { randomUUID } from "node:crypto";
import { DynamoDBDedupeStore, DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countedClient, type Dynalite, startDynalite, stopDynalite } from "../../support/dynalite.js";
import { SECRET } from "../../support/receiver.js";

// What `order` costs on DynamoDB in requests, counted on the real SDK (a middleware on the
// client's stack, which sees each command once, whatever the SDK retries) against dynalite:
// the figures docs/order.md gives, so a change that adds a request shows here.

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

/** Requests per delivery of `count` fresh events (each of its own flag unless `oneFlag`), with and without `order`. */
async function perDelivery(order: boolean, count: number, oneFlag = false): Promise<number> {
  const scope = `count-${randomUUID().slice(0, 8)}`;
  const { client, sent } = countedClient(db);
  const handle = webhookHandler({
    secret: SECRET,
    dedupe: { store: new DynamoDBDedupeStore(client, { table: db.table, scope }), ttl: "1h" },
    ...(order && { order: { store: new DynamoDBOrderStore(client, { table: db.table, scope }) } }),
    onEvent: () => {},
  });
  for (let n = 0; n < count; n++) {
    const event = createEvent("flag.updated", {
      createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, n)).toISOString(),
      data: { flag: oneFlag ? "checkout" : `flag-${n}`, changes: [{ path: "on", from: false, to: n % 2 === 0 }] },
    });
    expect((await handle(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
  }
  return sent() / count;
}

describe("DynamoDB requests per delivery", () => {
  it("dedupe alone: 2 (the claim, the done mark)", async () => {
    expect(await perDelivery(false, 10)).toBe(2);
  });

  it("with order: 2 more (the hold that reads the positions, the commit that writes them and ends the hold), on new flags and on one flag alike", async () => {
    expect(await perDelivery(true, 10)).toBe(4);
    expect(await perDelivery(true, 10, true)).toBe(4);
  });
});
