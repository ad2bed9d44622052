import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { FlagPositions } from "flag-webhooks";
import { DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "../../support/dynalite.js";

// A flag's positions past one DynamoDB item, kept in parts (src/stores/order/dynamodb-parts.ts),
// against dynalite: what a reader sees after a commit, after a commit whose hold ran out, and
// that the parts a flag's item no longer names are deleted.

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

/** Positions of `count` fields of 300-char paths (about 330 bytes each), all at `label`'s position. */
function wide(count: number, label: string): FlagPositions {
  const fields: FlagPositions["fields"] = {};
  for (let i = 0; i < count; i++) fields[`production\u0000${String(i).padEnd(300, "x")}`] = [1000, label] as never;
  return { fields };
}

/** The parts of flag `flag`'s positions in `scope` there are now. */
const parts = (scope: string, flag: string) => db.items(`order:${scope}#${flag}#part:`);

describe("DynamoDBOrderStore: a flag's positions past one item", () => {
  it("keeps them in parts the flag's item names, reads them back whole, and deletes the parts a newer commit replaced", async () => {
    const scope = `parts-${randomUUID().slice(0, 8)}`;
    const store = new DynamoDBOrderStore(db.client(), { table: db.table, scope });
    const first = wide(2000, "evt_a");
    const hold = await store.hold("wide", 60_000);
    await hold.commit(first);
    const item = (await db.item(`order:${scope}#wide`)) as Record<string, { S?: string; N?: string }>;
    expect(item.positions).toBeUndefined();
    expect(Number(item.parts?.N)).toBeGreaterThan(1);
    const before = await parts(scope, "wide");
    expect(before).toHaveLength(Number(item.parts?.N));

    const again = await store.hold("wide", 60_000);
    expect(again.positions).toEqual(first);
    const second = wide(2100, "evt_b");
    await again.commit(second);
    // The old parts are deleted after the commit, not waited for: looked at until they are gone.
    const names = (list: Record<string, unknown>[]) => list.map((part) => (part.pk as { S: string }).S);
    while (names(await parts(scope, "wide")).some((name) => names(before).includes(name))) await sleep(20);
    const third = await store.hold("wide", 60_000);
    expect(third.positions).toEqual(second);
    await third.release();
  }, 60_000);

  it("leaves the record as it was when a commit's hold ran out after its parts were written", async () => {
    const scope = `parts-${randomUUID().slice(0, 8)}`;
    const instance = () => new DynamoDBOrderStore(db.client(), { table: db.table, scope });
    const [one, two] = [instance(), instance()];
    const first = wide(2000, "evt_a");
    await (await one.hold("wide", 60_000)).commit(first);
    const lapsing = await one.hold("wide", 200);
    const taken = await two.hold("wide", 60_000);
    await expect(lapsing.commit(wide(2100, "evt_late"))).rejects.toThrow(/ran out/);
    expect(taken.positions).toEqual(first);
    await taken.release();
    const after = await one.hold("wide", 60_000);
    expect(after.positions).toEqual(first);
    await after.release();
  }, 60_000);
});
