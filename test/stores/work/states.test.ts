import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// An inbox table holds mostly done ids, kept for the retention (30 days by default), beside a few
// waiting events. What reads the waiting ones (pending(), parked(), counts(), which the
// OpenTelemetry gauges call at each collection, and replay({ since })) must read them by the two
// partial indexes, not every id of the scope: on Postgres, 60-70 ms a call on a scope of 200,000
// done ids before, and growing with the table.

const DONE = 5000;

/** Runs what reads the waiting events, on an inbox whose scope holds DONE done ids, 3 pending and 2 parked. */
async function readWaiting(inbox: PostgresInbox | SqliteInbox): Promise<void> {
  expect((await inbox.pending()).length).toBe(3);
  expect((await inbox.parked()).length).toBe(2);
  expect(await inbox.counts()).toMatchObject({ pending: 3, running: 0, parked: 2 });
  expect(await inbox.replay({ since: 0 })).toBe(5);
}

describe("SqliteInbox: the waiting events read by the inbox's partial indexes", () => {
  it("pending(), parked(), counts() and replay({ since }) each use the due or the parked index, on 5,000 done ids", async () => {
    const statements: string[] = [];
    const db = new Database(databaseFile(), { verbose: (sql) => statements.push(String(sql)) });
    try {
      const inbox = new SqliteInbox(db, { scope: "waiting" });
      await inbox.migrate();
      db.exec(`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${DONE})
        insert into flag_webhooks_inbox (scope, id, state, expires_at, handled_at, received_at)
        select 'waiting', 'evt_done_' || i, 'done', 9e15, 0, i from n`);
      for (const i of [1, 2, 3])
        await inbox.enqueue()(createEvent("flag.updated", { id: `evt_pending_${i}` }) as never);
      db.exec(
        `update flag_webhooks_inbox set state = 'parked', next_at = null where id in ('evt_pending_1', 'evt_pending_2')`,
      );
      for (const i of [4, 5, 6])
        await inbox.enqueue()(createEvent("flag.updated", { id: `evt_pending_${i}` }) as never);
      db.exec(`delete from flag_webhooks_inbox where id = 'evt_pending_6'`);
      db.exec("analyze");
      statements.length = 0;
      await readWaiting(inbox);
      // better-sqlite3 reports each statement with its parameters written in: plan each as it ran.
      const reads = statements.filter((sql) => /^\s*(select|update)/i.test(sql) && sql.includes("flag_webhooks_inbox"));
      expect(reads).toHaveLength(4);
      for (const sql of reads) {
        const plan = db.prepare(`explain query plan ${sql}`).all() as { detail: string }[];
        const tableReads = plan.map((row) => row.detail).filter((detail) => /flag_webhooks_inbox\b/.test(detail));
        expect(tableReads.length, sql).toBeGreaterThan(0);
        for (const detail of tableReads) expect(detail, sql).toMatch(/USING INDEX flag_webhooks_inbox_(due|parked)\b/);
      }
    } finally {
      db.close();
    }
  });
});

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);

describe.skipIf(!availability.available)(
  "PostgresInbox: the waiting events read by the inbox's partial indexes",
  () => {
    it("pending(), parked(), counts() and replay({ since }) read the 5 waiting rows, not the scope's 5,000 done ids", async () => {
      const scope = `waiting-${randomUUID().slice(0, 8)}`;
      const pool = new pg.Pool({ connectionString: database.url, max: 2, application_name: scope });
      try {
        const inbox = new PostgresInbox(pool, { scope });
        await database.admin.query(
          `insert into flag_webhooks_inbox (scope, id, state, expires_at, received_at)
         select $1, 'evt_done_' || i, 'done', now() + interval '1 day', i from generate_series(1, ${DONE}) i`,
          [scope],
        );
        for (const i of [1, 2, 3, 4, 5])
          await inbox.enqueue()(createEvent("flag.updated", { id: `evt_${scope}_${i}` }) as never);
        await database.admin.query(
          "update flag_webhooks_inbox set state = 'parked', next_at = null where scope = $1 and id in ($2, $3)",
          [scope, `evt_${scope}_1`, `evt_${scope}_2`],
        );
        await database.admin.query("analyze flag_webhooks_inbox");
        // The inbox's connections' table statistics reach the view once they exit.
        await pool.query("select 1");
        const before = (await database.tableReads({ pool, name: scope })).rows;
        const measured = new pg.Pool({ connectionString: database.url, max: 2, application_name: `${scope}-m` });
        await readWaiting(new PostgresInbox(measured, { scope }));
        const read = (await database.tableReads({ pool: measured, name: `${scope}-m` })).rows - before;
        // Each of the 4 statements reads the waiting rows (5 at most), not the 5,000 done ids.
        expect(read).toBeLessThan(100);
      } finally {
        await pool.end().catch(() => {});
      }
    }, 30_000);
  },
);
