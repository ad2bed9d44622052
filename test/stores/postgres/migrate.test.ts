import { readFileSync } from "node:fs";
import { type InboxClient, PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// migrate() runs on every start ("safe on every start"), so it must be quiet on every start: its
// "create ... if not exists" statements make Postgres send a NOTICE for what already exists, and
// postgres.js prints each NOTICE by default (about ten lines each).

const availability = postgresAvailability();
const skip = availability.available ? undefined : availability.reason;

describe.skipIf(skip !== undefined)("PostgresInbox.migrate() on a real PostgreSQL", () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await testDatabase();
  });
  afterAll(async () => {
    await database?.close();
  });

  it("sends no NOTICE to postgres.js, on the first start and every start after", async () => {
    const notices: string[] = [];
    const sql = postgres(database.url, { max: 2, onnotice: (notice) => notices.push(String(notice.message)) });
    try {
      const inbox = new PostgresInbox(sql, { scope: "migrate-postgresjs" });
      await inbox.migrate();
      await inbox.migrate();
      await inbox.migrate();
      expect(notices).toEqual([]);
      // The same client hears the NOTICE of the same statement run outside migrate(): the
      // listener works, and the client's own setting is untouched.
      await sql.unsafe("create table if not exists flag_webhooks_inbox (scope text)");
      expect(notices).toEqual(['relation "flag_webhooks_inbox" already exists, skipping']);
    } finally {
      await sql.end();
    }
  });

  it("sends no NOTICE to a pg Client, and leaves its client_min_messages as it was", async () => {
    const client = new pg.Client({ connectionString: database.url });
    const notices: string[] = [];
    client.on("notice", (notice) => notices.push(String(notice.message)));
    await client.connect();
    try {
      const inbox = new PostgresInbox(client, { scope: "migrate-pg", table: "app_inbox" });
      await inbox.migrate();
      await inbox.migrate();
      expect(notices).toEqual([]);
      const { rows } = await client.query("show client_min_messages");
      expect(rows).toEqual([{ client_min_messages: "notice" }]);
      await client.query("create index if not exists app_inbox_expires on app_inbox (scope, expires_at)");
      expect(notices).toEqual(['relation "app_inbox_expires" already exists, skipping']);
    } finally {
      await client.end();
    }
  });

  it("a migrate() that fails rejects with Postgres's error, rolls back and gives its connection back to the pool", async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 2 });
    try {
      const inbox = new PostgresInbox(pool, { scope: "migrate-fails", table: "no_such_schema.inbox" });
      await expect(inbox.migrate()).rejects.toMatchObject({ code: "3F000" });
      // Rolled back: the client is idle again, not held in an aborted transaction, and the inbox's
      // one turn of this pool (max 2, one kept free) is free for the next migrate().
      expect([pool.totalCount, pool.idleCount]).toEqual([1, 1]);
      await new PostgresInbox(pool, { scope: "migrate-fails" }).migrate();
      const { rows } = await pool.query(
        "select state from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'",
      );
      expect(rows).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  // The page's recipe for a big table: the parked index built beforehand without the table's lock
  // (`create index concurrently`), under the name migrate() looks for, which then leaves it alone.
  it("leaves the parked index the keep then work page builds concurrently as it is", async () => {
    const page = readFileSync(new URL("../../../docs/inbox-worker.md", import.meta.url), "utf8");
    const recipe = /`(create index concurrently [^`]+)`/.exec(page)?.[1];
    expect(recipe).toMatch(/ on flag_webhooks_inbox \(scope, received_at\) where state = 'parked'$/);
    const pool = new pg.Pool({ connectionString: database.url, max: 2 });
    try {
      await new PostgresInbox(pool, { scope: "migrate-concurrent" }).migrate();
      await pool.query("drop index flag_webhooks_inbox_parked");
      await pool.query(recipe as string);
      const parked =
        "select oid::int as oid, pg_get_indexdef(oid) as def from pg_class where relname = 'flag_webhooks_inbox_parked'";
      const built = (await pool.query(parked)).rows;
      expect(built).toHaveLength(1);
      await new PostgresInbox(pool, { scope: "migrate-concurrent" }).migrate();
      expect((await pool.query(parked)).rows).toEqual(built);
      // The same index migrate() makes: the same columns and condition.
      const onTable = await pool.query(
        "select count(*)::int as n from pg_indexes where tablename = 'flag_webhooks_inbox' and indexdef like '%(scope, received_at)%parked%'",
      );
      expect(onTable.rows).toEqual([{ n: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it("sends no NOTICE through an InboxClient either", async () => {
    const client = new pg.Client({ connectionString: database.url });
    const notices: string[] = [];
    client.on("notice", (notice) => notices.push(String(notice.message)));
    await client.connect();
    const inboxClient: InboxClient<pg.Client> = {
      async transaction(fn) {
        await client.query("begin");
        try {
          const value = await fn(client);
          await client.query("commit");
          return value;
        } catch (error) {
          await client.query("rollback");
          throw error;
        }
      },
      query: async (text, params) => (await client.query(text, [...params])).rows,
    };
    try {
      await new PostgresInbox(inboxClient, { scope: "migrate-custom" }).migrate();
      await new PostgresInbox(inboxClient, { scope: "migrate-custom" }).migrate();
      expect(notices).toEqual([]);
      const { rows } = await client.query("select count(*)::int as n from flag_webhooks_inbox");
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await client.end();
    }
  });
});
