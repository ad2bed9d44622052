import { createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { Miniflare } from "miniflare";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectOneLineError, run } from "../support/cli.js";
import { COMPATIBILITY_DATE } from "../support/cloudflare-bundle.js";
import { type TestDatabase, testDatabase } from "../support/postgres-database.js";
import { postgresAvailability } from "../support/postgres-server.js";
import { databaseFile } from "../support/sqlite.js";

// `flag-webhooks schema sqlite|postgres` prints the SQL a user puts in a migration file instead
// of calling migrate(). Its SQL, applied to a fresh database as a migration tool would, must make
// the very schema migrate() makes, on every driver: compared in the database's own catalog
// (columns and their types, defaults, keys, checks, indexes), not as text.

/** The printed SQL of `args`, after checking the command succeeded. */
async function printed(args: string[]): Promise<string> {
  const result = await run(["schema", ...args]);
  expect([result.code, result.stderr]).toEqual([0, ""]);
  return result.stdout;
}

type Rows = readonly Record<string, unknown>[];

/** SQLite's catalog of the inbox's tables and indexes, through any way of running a query. */
async function sqliteCatalog(query: (sql: string) => Promise<Rows>): Promise<unknown> {
  const objects = await query(
    "select type, name, tbl_name, sql from sqlite_master where name like 'flag_webhooks%' or name like 'app_inbox%' order by name",
  );
  const details = [];
  for (const { type, name } of objects) {
    const pragma = type === "table" ? "table_xinfo" : "index_xinfo";
    details.push(await query(`select * from pragma_${pragma}('${name}') order by 1`));
    if (type === "table") details.push(await query(`select * from pragma_index_list('${name}') order by name`));
  }
  return { objects, details };
}

describe("schema sqlite", () => {
  /** The catalog of a fresh SQLite file after the printed SQL ran on it, as a migration does. */
  async function printedCatalog(args: string[] = []): Promise<unknown> {
    const db = new Database(databaseFile());
    try {
      db.exec(await printed(["sqlite", ...args]));
      return await sqliteCatalog(async (sql) => db.prepare(sql).all() as Rows);
    } finally {
      db.close();
    }
  }

  it("prints what migrate() makes on better-sqlite3, for the default table and a named one", async () => {
    for (const args of [[], ["--table", "app_inbox"]]) {
      const db = new Database(databaseFile());
      try {
        const table = args[1];
        await new SqliteInbox(db, { scope: "schema", ...(table ? { table } : {}) }).migrate();
        const catalog = await sqliteCatalog(async (sql) => db.prepare(sql).all() as Rows);
        expect((catalog as { objects: Rows }).objects).toHaveLength(4);
        // The column of the delivery's trace context, for each attempt's span.
        expect(JSON.stringify(catalog)).toContain('"name":"trace_context"');
        expect(await printedCatalog(args)).toEqual(catalog);
      } finally {
        db.close();
      }
    }
  });

  it("prints what migrate() makes on @libsql/client", async () => {
    const client = createClient({ url: `file:${databaseFile()}` });
    try {
      await new SqliteInbox(client, { scope: "schema" }).migrate();
      const catalog = await sqliteCatalog(async (sql) => (await client.execute(sql)).rows.map((row) => ({ ...row })));
      expect(await printedCatalog()).toEqual(catalog);
    } finally {
      client.close();
    }
  });

  it("prints what migrate() makes on D1 (miniflare's real binding), so a wrangler migration can replace it", async () => {
    const mf = new Miniflare({
      modules: true,
      script: "export default { fetch: () => new Response('') }",
      compatibilityDate: COMPATIBILITY_DATE,
      d1Databases: ["DB"],
    });
    try {
      const d1 = await mf.getD1Database("DB");
      await new SqliteInbox(d1 as never, { scope: "schema" }).migrate();
      const catalog = await sqliteCatalog(async (sql) => (await d1.prepare(sql).all()).results as Rows);
      expect(await printedCatalog()).toEqual(catalog);
    } finally {
      await mf.dispose();
    }
  }, 60_000);

  it("prints statements that run again on a database migrate() already made", async () => {
    const db = new Database(databaseFile());
    try {
      await new SqliteInbox(db, { scope: "schema" }).migrate();
      db.exec(await printed(["sqlite"]));
      db.exec(await printed(["sqlite"]));
      await new SqliteInbox(db, { scope: "schema" }).migrate();
      expect(db.prepare("select count(*) as n from sqlite_master where name like 'flag_webhooks%'").get()).toEqual({
        n: 4,
      });
    } finally {
      db.close();
    }
  });
});

const availability = postgresAvailability();

describe.skipIf(!availability.available)("schema postgres (a real PostgreSQL)", () => {
  let server: TestDatabase;
  let admin: pg.Client;
  const made: string[] = [];
  beforeAll(async () => {
    server = await testDatabase();
    admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
  });
  afterAll(async () => {
    for (const name of made) await admin?.query(`drop database if exists ${name} with (force)`);
    await admin?.end();
    await server?.close();
  });

  /** A fresh, empty database on the test's server: its URL. */
  async function freshDatabase(): Promise<string> {
    const name = `schema_${made.length}_${process.pid}`;
    await admin.query(`create database ${name}`);
    made.push(name);
    const url = new URL(server.url);
    url.pathname = `/${name}`;
    return url.toString();
  }

  /** Postgres's catalog of every table and index outside the system's schemas, and of schema `app`. */
  async function catalog(url: string): Promise<unknown> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const where = "table_schema not in ('pg_catalog', 'information_schema')";
      const columns = await client.query(
        `select table_schema, table_name, column_name, ordinal_position, data_type, is_nullable, column_default
         from information_schema.columns where ${where} order by 1, 2, 4`,
      );
      const constraints = await client.query(
        `select n.nspname, c.conrelid::regclass::text as on_table, c.conname, c.contype, pg_get_constraintdef(c.oid) as def
         from pg_constraint c join pg_namespace n on n.oid = c.connamespace
         where n.nspname not in ('pg_catalog', 'information_schema') order by 1, 2, 3`,
      );
      const indexes = await client.query(
        "select schemaname, tablename, indexname, indexdef from pg_indexes where schemaname not in ('pg_catalog', 'information_schema') order by 1, 2, 3",
      );
      return { columns: columns.rows, constraints: constraints.rows, indexes: indexes.rows };
    } finally {
      await client.end();
    }
  }

  /** The catalog of a fresh database after the printed SQL of `args`, then `after`, ran on it. */
  async function printedCatalog(args: string[], after = ""): Promise<unknown> {
    const url = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(`${await printed(["postgres", ...args])}${after}`);
    } finally {
      await client.end();
    }
    return catalog(url);
  }

  it("prints what migrate() makes through pg, for the default table and one in a schema", async () => {
    const url = await freshDatabase();
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    try {
      await new PostgresInbox(pool, { scope: "schema" }).migrate();
      await pool.query("create schema app");
      await new PostgresInbox(pool, { scope: "schema", table: "app.webhook_inbox" }).migrate();
    } finally {
      await pool.end();
    }
    const migrated = (await catalog(url)) as { columns: Rows; indexes: Rows };
    // Two tables of 15 columns: handle()'s 6 and keep-then-work's 9 (the trace context among them).
    expect(migrated.columns).toHaveLength(30);
    expect(migrated.columns.filter((column) => column.column_name === "trace_context")).toHaveLength(2);
    expect(migrated.indexes).toHaveLength(8);
    // The schema "app" is the user's to make before its table, as the test made it for migrate().
    const app = await printed(["postgres", "--table", "app.webhook_inbox"]);
    expect(await printedCatalog([], `create schema app;\n${app}`)).toEqual(migrated);
  });

  it("prints what migrate() makes through postgres.js, and runs again on a database it made", async () => {
    const url = await freshDatabase();
    const sql = postgres(url, { max: 2, onnotice: () => {} });
    try {
      await new PostgresInbox(sql, { scope: "schema" }).migrate();
      const migrated = await catalog(url);
      expect(await printedCatalog([])).toEqual(migrated);
      await sql.unsafe(await printed(["postgres"]));
      await new PostgresInbox(sql, { scope: "schema" }).migrate();
      expect(await catalog(url)).toEqual(migrated);
    } finally {
      await sql.end();
    }
  });
});

describe("schema: usage", () => {
  it("refuses a missing or unknown store, extra arguments and a table that is no table name", async () => {
    const cases: [string[], string][] = [
      [["schema"], "missing the store: sqlite or postgres"],
      [["schema", "mysql"], 'unknown store "mysql"; use sqlite or postgres'],
      [["schema", "sqlite", "postgres"], "expected one store, got 2 arguments"],
      [["schema", "sqlite", "--table", "a b"], '--table must be a table name, optionally "schema.table", got "a b"'],
      [
        ["schema", "postgres", "--table", 'x"; drop table y; --'],
        '--table must be a table name, optionally "schema.table", got "x"; drop table y; --"',
      ],
    ];
    for (const [args, message] of cases) {
      const result = await run(args);
      expectOneLineError(result, 2, message, "schema");
      expect(result.stdout).toBe("");
    }
  });

  it("starts with a comment naming the store and the version, then one statement per paragraph", async () => {
    const text = await printed(["sqlite"]);
    expect(text.split("\n")[0]).toBe(
      "-- flag-webhooks 0.0.0-dev: the SqliteInbox's table, as its migrate() creates it.",
    );
    expect(text.split("\n\n").slice(1)).toEqual([
      expect.stringMatching(/^create table if not exists "flag_webhooks_inbox" \(\n[\s\S]*\) without rowid;$/),
      'create index if not exists "flag_webhooks_inbox_expires" on "flag_webhooks_inbox" (scope, expires_at);',
      `create index if not exists "flag_webhooks_inbox_due" on "flag_webhooks_inbox" (scope, next_at) where state in ('pending', 'running');`,
      `create index if not exists "flag_webhooks_inbox_parked" on "flag_webhooks_inbox" (scope, received_at) where state = 'parked';\n`,
    ]);
  });
});
