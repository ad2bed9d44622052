// The inbox's view of a SQLite database without interactive transactions: Cloudflare D1, whose
// atomic unit is `batch()`, and a Durable Object's SQLite storage, whose is `transactionSync()`.
// Neither can hold a transaction open while a handler awaits, so the handler returns its writes
// as statements, and the inbox runs them at COMMIT, with the insert of the event id, as one
// atomic unit: if the id is already there the insert fails on its primary key, the whole unit
// with it, and the handler's writes never happen.
import type { Param } from "./drivers.js";
import type { D1Like, DurableObjectSqlLike, SqliteRow, SqlStatement } from "./types.js";

/** A statement of the inbox's own. */
export interface Statement {
  sql: string;
  params: readonly Param[];
}

/** A database whose atomic unit is a batch, as the inbox uses it. */
export interface BatchDriver {
  /** What the handler gets, for reads: the D1 binding, or the Durable Object's `sql`. */
  readonly database: unknown;
  /** One statement on its own. */
  query(sql: string, params: readonly Param[]): Promise<SqliteRow[]>;
  /** Runs `own` then the handler's `theirs`, all or nothing; rejects when nothing was written. */
  batch(own: readonly Statement[], theirs: readonly unknown[]): Promise<void>;
  /** Throws a TypeError naming what is wrong when `theirs` are not statements for this database. */
  check(theirs: unknown): readonly unknown[];
}

/** Whether `db` is a D1 binding: `prepare` and `batch` (a libSQL client has `batch`, but `execute`). */
export function isD1(db: unknown): db is D1Like {
  const c = db as Record<string, unknown> | null;
  return typeof c?.prepare === "function" && typeof c.batch === "function" && typeof c.execute !== "function";
}

/** Whether `db` is a Durable Object's storage with SQLite (`ctx.storage`). */
export function isDurableObjectSql(db: unknown): db is DurableObjectSqlLike {
  const c = db as { sql?: { exec?: unknown }; transactionSync?: unknown } | null;
  return typeof c?.sql?.exec === "function" && typeof c.transactionSync === "function";
}

interface D1Shape {
  prepare(sql: string): D1Statement;
  batch(statements: unknown[]): Promise<unknown>;
}
interface D1Statement {
  bind(...values: Param[]): D1Statement;
  all(): Promise<{ results?: SqliteRow[] }>;
}

/** The driver for a D1 binding: its batch is a transaction (D1 rolls it all back if any statement fails). */
export function d1Driver(db: D1Like): BatchDriver {
  const d1 = db as unknown as D1Shape;
  const prepare = ({ sql, params }: Statement) => d1.prepare(sql).bind(...params);
  return {
    database: db,
    // Stryker disable next-line ArrayDeclaration: equivalent on D1, whose all() always has results (empty when no row)
    query: async (sql, params) => (await prepare({ sql, params }).all()).results ?? [],
    async batch(own, theirs) {
      await d1.batch([...own.map(prepare), ...theirs]);
    },
    check(theirs) {
      const statements = listOf(theirs);
      for (const statement of statements) {
        if (typeof (statement as { bind?: unknown } | null)?.bind !== "function") {
          throw new TypeError(
            "flag-webhooks: with D1, the inbox's handler returns the statements to run with the event id: an array of db.prepare(sql).bind(...) statements",
          );
        }
      }
      return statements;
    },
  };
}

/** The driver for a Durable Object's SQLite storage: `transactionSync` is its transaction. */
export function durableObjectDriver(storage: DurableObjectSqlLike): BatchDriver {
  const exec = (sql: string, params: readonly unknown[]) =>
    storage.sql.exec(sql, ...(params as never[])).toArray() as SqliteRow[];
  return {
    database: storage.sql,
    query: async (sql, params) => exec(sql, params),
    async batch(own, theirs) {
      storage.transactionSync(() => {
        for (const { sql, params } of own) exec(sql, params);
        for (const [sql, ...params] of theirs as SqlStatement[]) exec(sql, params);
      });
    },
    check(theirs) {
      const statements = listOf(theirs);
      for (const statement of statements) {
        if (!Array.isArray(statement) || typeof statement[0] !== "string") {
          throw new TypeError(
            "flag-webhooks: with a Durable Object's SQLite storage, the inbox's handler returns the statements to run with the event id: an array of [sql, ...bindings]",
          );
        }
      }
      return statements;
    },
  };
}

/** What a batch handler returned, as a list: nothing is no statement. */
function listOf(theirs: unknown): readonly unknown[] {
  if (theirs === undefined || theirs === null) return [];
  if (Array.isArray(theirs)) return theirs;
  throw new TypeError(
    "flag-webhooks: on D1 and Durable Objects, the inbox's handler returns an array of statements (or nothing); it answers through throwing, never through a reply",
  );
}
