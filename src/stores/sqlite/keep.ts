// Keep-then-work on SQLite: its dialect of the shared statements (src/stores/work/), the database
// as keep-then-work uses it, and what migrate() adds to an existing table. SQLite has one writer:
// a worker takes due rows in a write transaction (BEGIN IMMEDIATE) and runs each attempt in
// another, which holds the write lock while the handler runs, so no other connection, in any
// process, takes or runs an event meanwhile: the attempts on one file run one at a time.
import { unavailable } from "../inbox-shell.js";
import type { HeldTransaction, KeepBound, KeepDatabase, KeepParam } from "../work/database.js";
import { ARRIVAL_FIELDS, type Dialect, KEEP_COLUMNS } from "../work/statements.js";
import { type InteractiveDriver, isConnection, type OpenTransaction, type Param } from "./drivers.js";
import { tableDefinition } from "./schema.js";
import { turnExpired, turnsOf } from "./turns.js";
import type { SqliteConnection, SqliteRow } from "./types.js";
import { oneWrites, preparedOn, type SyncShape } from "./without-waiting.js";

/**
 * SQLite's dialect: numbered parameters (`?6`, turned into plain `?` by {@link positional} for
 * the drivers that take only those), times as ms integers, no row lock (the write lock is the
 * lock).
 */
export const SQLITE_DIALECT: Dialect = {
  param: (n) => `?${n}`,
  never: "9223372036854775807",
  at: (ms) => `(${ms})`,
  lock: "",
  xid: "",
  rows: (n) =>
    `(select ${ARRIVAL_FIELDS.map((field) => `json_extract(value, '$.${field}') as ${field}`).join(", ")} from json_each(?${n})) as r`,
};

/** A statement with `?N` parameters as one with plain `?` and the order to bind its values in. */
interface Positional {
  sql: string;
  order: number[];
}

const compiled = new Map<string, Positional>();

/** `sql` with plain `?` parameters (better-sqlite3 refuses a value bound twice as `?1`), and `params` in their order. */
export function positional(sql: string, params: readonly KeepParam[]): { sql: string; params: Param[] } {
  let statement = compiled.get(sql);
  // Stryker disable next-line ConditionalExpression: a cache; compiled again, a statement is the same
  if (!statement) {
    const order: number[] = [];
    const text = sql.replace(/\?(\d+)/g, (_, n: string) => {
      order.push(Number(n) - 1);
      return "?";
    });
    statement = { sql: text, order };
    compiled.set(sql, statement);
  }
  return { sql: statement.sql, params: statement.order.map((index) => params[index] ?? null) };
}

/**
 * How the inbox lends keep-then-work its transactions: its turn and write lock, and its COMMIT,
 * each waited for until `deadline` (ms since the epoch; by default the inbox's `timeout` from now).
 */
export interface SqliteTransactions {
  begin(deadline?: number): Promise<OpenTransaction>;
  commit(open: OpenTransaction, deadline?: number): Promise<void>;
}

/**
 * An interactive SQLite database as keep-then-work uses it: a statement committed on its own goes
 * through the driver's `write` where it has one (no handler runs in it), waiting for the turn and
 * the lock up to `timeout` ms, as a transaction of the inbox does.
 */
export function sqliteKeep(
  transactions: SqliteTransactions,
  driver: InteractiveDriver,
  timeout: number,
  keepOn?: Pick<InteractiveDriver, "write" | "writeNow">,
): KeepDatabase {
  const inside = (open: OpenTransaction, sql: string, params: readonly KeepParam[]) => {
    const statement = positional(sql, params);
    return open.query(statement.sql, statement.params);
  };
  // A transaction with its first statement run; rolled back if that statement fails, or if a
  // delivery it keeps was answered while it waited for the lock.
  const opened = async (sql: string, params: readonly KeepParam[], bound?: KeepBound) => {
    const open = await transactions.begin(bound?.deadline);
    try {
      if (bound?.abandoned()) throw turnExpired(timeout);
      return { open, rows: await inside(open, sql, params) };
    } catch (error) {
      await open.rollback();
      throw error;
    }
  };
  const ones = oneStatements(driver, timeout, opened, transactions);
  return {
    // One writer: one attempt's transaction at a time.
    capacity: 1,
    ...ones,
    // keepOn: the receiving side keeps on the inbox's own connection, as `query` does on the app's.
    ...(keepOn && { keeping: oneStatements(keepOn, timeout, opened, transactions) }),
    async begin(sql, params): Promise<HeldTransaction> {
      const { open, rows } = await opened(sql, params);
      return {
        tx: open.tx,
        rows,
        query: (text, values) => inside(open, text, values),
        commit: () => transactions.commit(open),
        rollback: () => open.rollback(),
        // A synchronous connection cannot be cut off under a handler: rolled back, so nothing of
        // the attempt commits (the handler is told through its signal to stop).
        abandon: () => open.rollback(),
      };
    },
  };
}

/**
 * A statement committed on its own, through `driver`'s `write` (and `writeNow`) where it has them,
 * else in a transaction `opened` and committed.
 */
function oneStatements(
  driver: Pick<InteractiveDriver, "write" | "writeNow">,
  timeout: number,
  opened: (
    sql: string,
    params: readonly KeepParam[],
    bound?: KeepBound,
  ) => Promise<{ open: OpenTransaction; rows: SqliteRow[] }>,
  transactions: SqliteTransactions,
): Pick<KeepDatabase, "query" | "queryNow"> {
  const { writeNow, write } = driver;
  return {
    queryNow:
      writeNow &&
      ((sql, params, bound) => {
        const statement = positional(sql, params);
        try {
          return writeNow(statement.sql, statement.params, bound);
        } catch (error) {
          // As in query: no handler runs in it, whatever failed is the store.
          throw unavailable(error, "SQLite");
        }
      }),
    async query(sql, params, bound) {
      if (write) {
        const statement = positional(sql, params);
        const deadline = bound?.deadline ?? Date.now() + timeout;
        try {
          // Synchronous: nothing commits once the bound is abandoned (its 503 is exact).
          return await write(statement.sql, statement.params, deadline, () => turnExpired(timeout), bound);
        } catch (error) {
          // No handler runs in it: whatever failed is the store, as when a transaction cannot begin.
          throw unavailable(error, "SQLite");
        }
      }
      const { open, rows } = await opened(sql, params, bound);
      await transactions.commit(open, bound?.deadline);
      return rows;
    },
  };
}

/** What a driver tells of a transaction open on it: better-sqlite3 and bun:sqlite, node:sqlite. */
interface InTransaction {
  inTransaction?: boolean;
  isTransaction?: boolean;
}

/**
 * The option keepOn: a second connection to the inbox's file, the inbox's own, on which
 * `enqueue()` keeps its deliveries. Nothing of the app runs on it, so a keep there is one
 * autocommitted statement: with the busy_timeout at 0 (set once, here) every lock held elsewhere
 * fails it SQLITE_BUSY at once, in any journal mode, and it is tried again after pauses with the
 * event loop free; no transaction of the app's, no journal switch and no app statement still
 * being stepped can be on it, so it needs no BEGIN, no pragma and no COMMIT of its own.
 *
 * Its writes (see SqliteInboxOptions.keepOn; undefined without it), checked against `db`, the
 * inbox's connection: a synchronous connection, another one than `db`, to the same file (the file
 * `pragma database_list` names for the inbox's database, `schema` `"name".` or "" for main, on
 * both: not `:memory:` nor a temporary database, which no other connection sees). Sets its
 * busy_timeout to 0.
 */
export function keepOnDriver(
  keepOn: unknown,
  db: unknown,
  { schema }: { schema: string },
): Pick<InteractiveDriver, "write" | "writeNow"> | undefined {
  if (keepOn === undefined) return undefined;
  if (!isConnection(keepOn) || !isConnection(db) || keepOn === db) {
    throw new TypeError(
      'flag-webhooks: option "keepOn" must be a second synchronous connection to the inbox\'s file, beside a synchronous one',
    );
  }
  const file = fileOf(db, schema);
  if (!file || fileOf(keepOn, schema) !== file) {
    throw new TypeError(
      `flag-webhooks: option "keepOn" must be a connection to the inbox's own file (${file || "none: an in-memory or temporary database"})`,
    );
  }
  const connection = keepOn as unknown as SyncShape & InTransaction;
  connection.exec("pragma busy_timeout = 0");
  const statement = preparedOn(connection);
  return oneWrites(turnsOf(keepOn), (sql, params) => {
    // The app's own code on it against the option's terms: a statement there would join its
    // transaction and not be committed before the answer.
    if (connection.inTransaction || connection.isTransaction) {
      throw new Error('flag-webhooks: a transaction is open on the "keepOn" connection, which is the inbox\'s own');
    }
    return statement(sql).all(...params);
  });
}

/** The file of the database `schema` names on `connection` ("" for `:memory:` or a temporary one). */
function fileOf(connection: SqliteConnection, schema: string): string {
  const name = schema ? schema.slice(1, -2) : "main";
  const rows = connection.prepare("pragma database_list").all() as SqliteRow[];
  return String(rows.find((row) => row.name === name)?.file ?? "");
}

/**
 * What migrate() does after it creates the table, in its transaction: adds the missing columns
 * (SQLite has no `add column if not exists`: `pragma table_info` says which), then, when the
 * table's state check is still `handle()`'s (claimed, done), rebuilds the table with the wider
 * one (SQLite cannot alter a constraint), copying every row. Each step is skipped once done;
 * the indexes follow, from the schema's list.
 */
export async function migrateKeep(
  open: OpenTransaction,
  table: { schema: string; name: string; quoted: string },
): Promise<void> {
  const { schema, name, quoted } = table;
  const columns = await open.query(`pragma ${schema}table_info("${name}")`, []);
  const present = new Set(columns.map((column) => String(column.name)));
  for (const [column, , type] of KEEP_COLUMNS) {
    if (!present.has(column)) await open.run(`alter table ${quoted} add column ${column} ${type}`, []);
  }
  // The table was created just before, in this transaction: its definition is there.
  const [definition] = (await open.query(`select sql from ${schema}sqlite_master where type = 'table' and name = ?`, [
    name,
  ])) as [SqliteRow];
  if (!String(definition.sql).includes("'parked'")) {
    const fresh = `${schema}"${name}__flag_webhooks_new"`;
    const all = [
      "scope",
      "id",
      "state",
      "token",
      "expires_at",
      "handled_at",
      ...KEEP_COLUMNS.map(([column]) => column),
    ];
    await open.run(tableDefinition(fresh, ""), []);
    await open.run(`insert into ${fresh} (${all.join(", ")}) select ${all.join(", ")} from ${quoted}`, []);
    await open.run(`drop table ${quoted}`, []);
    await open.run(`alter table ${fresh} rename to "${name}"`, []);
  }
}

/** The parts of a table option (already checked by statementsFor): its schema prefix, name, and quoted form. */
export function tableParts(table: string): { schema: string; name: string; quoted: string } {
  const parts = table.split(".");
  const name = parts.pop() as string;
  const schema = parts.length ? `"${parts[0]}".` : "";
  return { schema, name, quoted: `${schema}"${name}"` };
}
