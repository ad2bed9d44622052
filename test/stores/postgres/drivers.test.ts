import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { driverFor, sameTransaction } from "../../../src/stores/postgres/drivers.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// The pg driver's transaction once it has ended: its connection is back in the Pool, lent to the
// next transaction, and a late COMMIT or ROLLBACK of the ended one (a worker's rollback after a
// COMMIT that failed, say) must never reach that connection: it would end the other transaction.

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);

/** BEGIN on `driver` and the transaction's id, to check at COMMIT that it is still this transaction. */
async function begin(driver: ReturnType<typeof driverFor>) {
  const { transaction, rows } = await driver.begin(
    { text: "select txid_current()::text as xid", params: [] },
    new AbortController().signal,
  );
  return { transaction, check: sameTransaction(rows[0]?.xid, "test") };
}

describe.skipIf(!availability.available)("the pg driver's transaction, once ended", () => {
  // Committed, or its COMMIT failed (a deferred foreign key checked at COMMIT) and it rolled back.
  const endings = {
    committed: async (transaction: Awaited<ReturnType<typeof begin>>["transaction"], check: string) => {
      await transaction.query("insert into parents (id) values ($1)", [`p_${randomUUID()}`]);
      await transaction.commit(check);
    },
    "its COMMIT failed": async (transaction: Awaited<ReturnType<typeof begin>>["transaction"], check: string) => {
      await transaction.query("insert into children (parent_id) values ($1)", [`missing_${randomUUID()}`]);
      await expect(transaction.commit(check)).rejects.toMatchObject({ code: "23503" });
    },
  };
  for (const [how, end] of Object.entries(endings)) {
    it(`${how}: its rollback() and commit() send nothing to the connection the next transaction holds`, async () => {
      // One connection, so the next transaction takes the one the ended one gave back.
      const driver = driverFor(database.pool(1));
      const first = await begin(driver);
      await end(first.transaction, first.check);
      const next = await begin(driver);
      await first.transaction.rollback();
      await expect(first.transaction.commit(first.check)).rejects.toThrow(
        "flag-webhooks: the inbox's transaction has already ended",
      );
      const id = `p_${randomUUID()}`;
      await next.transaction.query("insert into parents (id) values ($1)", [id]);
      // Still the transaction that began: the ended one's ROLLBACK did not end it under its statements.
      await next.transaction.commit(next.check);
      const { rows } = await database.admin.query("select count(*)::int as n from parents where id = $1", [id]);
      expect(rows[0].n).toBe(1);
      expect(await database.openTransactions()).toBe(0);
    });
  }
});
