import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import { afterAll, beforeAll, expect } from "vitest";
import { type TestDatabase, testDatabase } from "./postgres-database.js";

/** A test file's database of effect rows, and the pools it made. */
export interface EffectsDatabase {
  /** A pool for the administration and the counts, not one an inbox under test uses. */
  readonly admin: pg.Pool;
  /** A connection string to the database. */
  readonly url: string;
  /** A new pool of `max` connections, ended after the file's tests. */
  pool(max?: number): pg.Pool;
  /** How many effect rows the handlers wrote for `id`. */
  effects(id: string): Promise<number>;
  /** How many connections sit idle in a transaction: an inbox that left one open. */
  openTransactions(): Promise<number>;
  /**
   * The inbox table's scan counts so far (sequential and index scans, and the rows they read);
   * with `ending`, once its pool has ended and its connections, named `name` (`application_name`),
   * have left the server: a backend's table statistics reach pg_stat_user_tables when it exits.
   */
  tableReads(ending?: { pool: pg.Pool; name: string }): Promise<{ seq: number; idx: number; rows: number }>;
}

/**
 * A database for a test file whose handlers write effect rows through an inbox: the inbox's table,
 * `effects (event_id)`, and `parents`/`children`, whose foreign key is checked only at COMMIT (a
 * COMMIT that fails on demand). Made before the file's tests, when Postgres is `available`, and
 * dropped after them with every pool it made.
 */
export function effectsDatabase(available: boolean): EffectsDatabase {
  let db: TestDatabase | undefined;
  let admin: pg.Pool | undefined;
  const pools: pg.Pool[] = [];
  beforeAll(async () => {
    if (!available) return;
    db = await testDatabase();
    admin = new pg.Pool({ connectionString: db.url, max: 4 });
    await new PostgresInbox(admin, { scope: "setup" }).migrate();
    await admin.query(`
      create table effects (event_id text not null);
      create table parents (id text primary key);
      create table children (parent_id text references parents (id) deferrable initially deferred)`);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(pools.map((made) => made.end()));
    await admin?.end();
    await db?.close();
  });
  const database: EffectsDatabase = {
    get admin() {
      return admin as pg.Pool;
    },
    get url() {
      return (db as TestDatabase).url;
    },
    pool(max = 10) {
      const made = new pg.Pool({ connectionString: database.url, max });
      pools.push(made);
      return made;
    },
    async effects(id) {
      const { rows } = await database.admin.query("select count(*) from effects where event_id = $1", [id]);
      return Number(rows[0].count);
    },
    async openTransactions() {
      const { rows } = await database.admin.query(
        "select count(*) from pg_stat_activity where state like 'idle in transaction%' and datname = current_database()",
      );
      return Number(rows[0].count);
    },
    async tableReads(ending) {
      if (ending) {
        await ending.pool.end();
        await expect
          .poll(async () => {
            const { rows } = await database.admin.query(
              "select count(*)::int as n from pg_stat_activity where application_name = $1",
              [ending.name],
            );
            return rows[0].n;
          })
          .toBe(0);
      }
      const { rows } = await database.admin.query(
        `select seq_scan::int as seq, idx_scan::int as idx, (seq_tup_read + coalesce(idx_tup_fetch, 0))::int as rows
         from pg_stat_user_tables where relname = 'flag_webhooks_inbox'`,
      );
      return rows[0];
    },
  };
  return database;
}
