import { randomUUID } from "node:crypto";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent } from "flag-webhooks/testing";
import pg from "pg";
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

// On pg, a transaction's first statement goes in one round trip with BEGIN, its text parameters as
// literals (`convert_from(decode('…', 'hex'), 'UTF8')`). That function's result took the collation
// of its encoding argument (a `name`, collated "C"), which is not the inbox's columns' own: the
// planner could then use no index on (scope, id), and every handle() claim and every attempt's lock
// read the whole table (a seq scan per delivery: at 50,000 events, 185 ms of CPU each, the Postgres
// soak slowed to 46 deliveries/s). Counted in pg_stat_user_tables once the inbox's connections exit
// (a backend's table statistics reach the view when it exits, before it leaves pg_stat_activity).
describe.skipIf(!availability.available)("the pg driver's statements with literals, on a table of 5,000 events", () => {
  it("read the inbox's rows by its index: handle()'s claim of new ids and of copies, and the worker's lock, scan no table", async () => {
    const scope = `indexed-${randomUUID().slice(0, 8)}`;
    await database.admin.query(
      `insert into flag_webhooks_inbox (scope, id, state, expires_at)
       select $1, 'evt_filled_' || n, 'done', now() + interval '1 day' from generate_series(1, 5000) n`,
      [scope],
    );
    await database.admin.query("analyze flag_webhooks_inbox");
    const before = await database.tableReads();
    const pool = new pg.Pool({ connectionString: database.url, max: 3, application_name: scope });
    const inbox = new PostgresInbox(pool, { scope });
    const ids = Array.from({ length: 4 }, () => `evt_${randomUUID()}`);
    for (const id of [...ids, ...ids]) {
      await inbox.handle(async (_event, tx) => {
        await tx.query("insert into effects (event_id) values ($1)", [id]);
      })({ id, type: "flag.updated" } as never);
    }
    const kept = `evt_kept_${randomUUID()}`;
    await inbox.enqueue()(createEvent("flag.updated", { id: kept }) as never);
    const worker = inbox.work(
      async (_event, tx) => {
        await tx.query("insert into effects (event_id) values ($1)", [kept]);
      },
      { interval: false },
    );
    expect(await worker.drain()).toBe(1);
    await worker.close();
    const after = await database.tableReads({ pool, name: scope });
    expect(await Promise.all([...ids, kept].map((id) => database.effects(id)))).toEqual([1, 1, 1, 1, 1]);
    expect(after.idx).toBeGreaterThan(before.idx);
    expect(after.seq - before.seq).toBe(0);
  }, 30_000);
});
