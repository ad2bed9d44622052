import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "../../support/dynalite.js";

// Attack: clock skew between two instances of one endpoint on DynamoDBOrderStore. A hold's lease
// was written as the holder's clock plus the lease (`leaseEnds`), and another instance took the
// flag over once `leaseEnds <= its own clock`: DynamoDB has no clock of its own in a condition, so
// an instance whose clock ran `s` ms ahead took over a live hold `s` ms early. Here: a 3 s lease,
// a second instance 2 s ahead, the first handler 1.5 s in. Now, as AWS's DynamoDB Lock Client
// does, a waiter takes a hold over only once it has seen the same hold (its token) unchanged for
// a whole lease measured on its own clock, so no clock is compared with another's.

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

describe("DynamoDBOrderStore: two instances whose clocks differ", () => {
  it("an instance whose clock is 2 s ahead does not take a flag held with a 3 s lease 1.5 s ago", async () => {
    const scope = `skew-${randomUUID().slice(0, 8)}`;
    const one = new DynamoDBOrderStore(db.client(), { table: db.table, scope });
    const two = new DynamoDBOrderStore(db.client(), { table: db.table, scope });
    const first = await one.hold("checkout", 3000);
    await sleep(1500);
    const real = Date.now.bind(Date);
    const ahead = vi.spyOn(Date, "now").mockImplementation(() => real() + 2000);
    let second: Awaited<ReturnType<typeof two.hold>> | undefined;
    try {
      second = await Promise.race([two.hold("checkout", 3000), sleep(500).then(() => undefined)]);
    } finally {
      ahead.mockRestore();
    }
    await first.release();
    await second?.release();
    // Two holds of one flag at once: the first handler still runs.
    expect(second).toBeUndefined();
  });
});
