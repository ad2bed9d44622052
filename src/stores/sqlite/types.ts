// The types users meet in flag-webhooks/sqlite: the databases the inbox takes, what a handler gets
// for each, and the options. No runtime code, and no import of any driver: each is known by its
// shape, and its own types are inferred from the database the user passes.
import type { WebhookEvent } from "../../events.js";

/** Rows as a driver returns them. */
export type SqliteRow = Record<string, unknown>;

/**
 * A synchronous SQLite connection, in three methods: `node:sqlite`'s `DatabaseSync`,
 * `better-sqlite3`'s `Database`, `bun:sqlite`'s `Database` and the `libsql` package all have this
 * shape, and any other synchronous driver that offers it plugs in as it is. The inbox runs its
 * transaction on this one connection (BEGIN IMMEDIATE … COMMIT), and the handler's `tx` is the
 * connection itself.
 *
 * @example
 * ```ts
 * // A driver of your own: statements with ? parameters.
 * const connection: SqliteConnection = {
 *   prepare: (sql) => ({ all: (...params) => myDriver.rows(sql, params), run: (...params) => myDriver.run(sql, params) }),
 *   exec: (sql) => myDriver.script(sql),
 * };
 * ```
 */
export interface SqliteConnection {
  /** A statement with `?` parameters: `all` resolves its rows, `run` runs it for its effect. */
  prepare(sql: string): { all(...params: never[]): unknown; run(...params: never[]): unknown };
  /** Runs SQL without parameters (one or more statements). */
  exec(sql: string): unknown;
}

/**
 * An asynchronous client in the shape of `@libsql/client`'s `Client` (a local file, or a libSQL
 * server such as Turso): `execute` for one statement, and `transaction("write")` for an
 * interactive write transaction (BEGIN IMMEDIATE) whose `tx` the handler gets.
 */
export interface SqliteAsyncClient<Tx extends SqliteAsyncTransaction = SqliteAsyncTransaction> {
  /**
   * `"file"` for a local file of `@libsql/client`: the inbox then begins with
   * `transaction("deferred")` and takes the write lock through that transaction's
   * `executeMultiple`, with the busy_timeout of the connection it holds at 0 for that instant.
   */
  readonly protocol?: string;
  execute(statement: { sql: string; args: never[] }): Promise<{ rows: ArrayLike<unknown> }>;
  transaction(mode: "write"): Promise<Tx>;
}

/** The transaction of a {@link SqliteAsyncClient}, as `@libsql/client`'s `Transaction`. */
export interface SqliteAsyncTransaction {
  execute(statement: { sql: string; args: never[] }): Promise<{ rows: ArrayLike<unknown> }>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  close(): void;
}

/**
 * A Cloudflare D1 binding, by its shape (`env.DB`): D1 has no interactive transaction, and its
 * atomic unit is `batch()`. With D1 the handler returns the statements to run, and the inbox
 * runs them in one batch with the insert of the event id.
 */
export interface D1Like {
  prepare(sql: string): { bind(...values: never[]): unknown };
  batch(statements: never[]): Promise<unknown>;
}

/**
 * A Durable Object's SQLite storage (`ctx.storage`), by its shape: `sql.exec` and
 * `transactionSync`, which runs a synchronous function as one transaction. As with D1, the
 * handler returns the statements to run, and the inbox runs them in one `transactionSync` with
 * the insert of the event id.
 */
export interface DurableObjectSqlLike {
  sql: { exec(query: string, ...bindings: never[]): { toArray(): unknown[] } };
  transactionSync<T>(fn: () => T): T;
}

/** A statement for a Durable Object's SQLite storage: the SQL, then its `?` bindings. */
export type SqlStatement = readonly [query: string, ...bindings: unknown[]];

/** Any database {@link SqliteInbox} takes. */
export type SqliteDatabase = SqliteConnection | SqliteAsyncClient | D1Like | DurableObjectSqlLike;

/**
 * What the handler gets as `tx` for a database: a synchronous connection is its own `tx` (the
 * statements it runs while the handler runs are in the inbox's transaction); a libSQL client gives
 * its `Transaction`; a D1 binding and a Durable Object's storage give themselves, for reads (their
 * writes are the statements the handler returns).
 *
 * @example
 * ```ts
 * type Tx = InboxTransaction<Client>; // @libsql/client: Transaction
 * const router = createRouter<[tx: InboxTransaction<DatabaseSync>]>(); // node:sqlite: DatabaseSync
 * ```
 */
export type InboxTransaction<Db> = Db extends { execute: unknown; transaction(mode: "write"): Promise<infer Tx> }
  ? Tx
  : Db extends DurableObjectSqlLike
    ? Db["sql"]
    : Db;

/**
 * The statements a batch handler returns: a D1 binding's prepared statements (`db.prepare(sql).bind(...)`),
 * or a Durable Object's `[query, ...bindings]`; `undefined` or none for no writes.
 */
export type InboxStatements<Db> = Db extends DurableObjectSqlLike
  ? readonly SqlStatement[]
  : Db extends { batch(statements: (infer Statement)[]): unknown }
    ? readonly Statement[]
    : never;

/**
 * What `handle(fn)` runs: the event, the transaction (or, on D1 and Durable Objects, the
 * database), then what the adapter passes. On D1 and Durable Objects it returns the statements
 * to run with the id; on every other database its writes through `tx` are in the transaction,
 * and what it returns is the receiver's answer, as for any `onEvent`.
 */
export type InboxHandler<Db, Context extends unknown[]> = Db extends D1Like | DurableObjectSqlLike
  ? (
      event: WebhookEvent,
      db: InboxTransaction<Db>,
      ...context: Context
    ) => InboxStatements<Db> | undefined | Promise<InboxStatements<Db> | undefined>
  : (event: WebhookEvent, tx: InboxTransaction<Db>, ...context: Context) => unknown;

/** Options of {@link SqliteInbox}. */
export interface SqliteInboxOptions {
  /**
   * Which endpoint this inbox is for, required: 1-100 characters of `A-Z a-z 0-9 . _ -`. Two
   * endpoints sharing a database never dedupe against each other; every instance of one app uses
   * the same scope and shares its ids.
   */
  scope: string;
  /** The table, optionally in an attached database (`"audit.webhook_inbox"`). Default `"flag_webhooks_inbox"`. */
  table?: string;
  /**
   * How long `handle()` remembers a handled id, in ms or as a duration: `prune()` deletes it after
   * that. At least the sender's retry horizon, and `maxAge` plus two minutes of clock skew (a
   * receiver given a shorter one refuses it with a TypeError). Default `"30d"`.
   */
  retention?: number | string;
  /**
   * The bound on waiting for the database: for this connection's turn (SQLite has one writer, and
   * the inbox runs one transaction at a time per connection), for the write lock another process
   * holds, and for each of the inbox's own steps; past it, `503 store_unavailable` with
   * `Retry-After`. Default `"5s"`. At most 2³¹−1 ms (a timer waits no longer), else a `TypeError`.
   */
  timeout?: number | string;
  /**
   * How long a handler may run in its transaction, which holds the connection's one write turn:
   * past it, the inbox rolls the transaction back and gives the turn to the next delivery, the
   * late handler's statements through `tx` fail, and the delivery answers `500 handler_error`
   * (the sender's retry runs it again). Default `"10s"`: twice `timeout`'s default, which is how
   * long the deliveries queued behind a handler wait for their turn before each answers 503.
   * Not on D1 and Durable Objects, whose handlers hold no transaction.
   */
  handlerTimeout?: number | string;
  /**
   * The clock keep-then-work reads (`enqueue()`, `work()`, `replay()`), in ms since the epoch:
   * every time it stores or compares. For tests. Default `Date.now`.
   */
  now?: () => number;
  /**
   * Apply each flag's changes in order, last writer wins per field (docs/order.md): the flag's
   * positions are read and written in the handler's transaction, in a table beside the inbox's
   * (`<table>_positions`, made by migrate()). `fn` sees only the fresh changes; an event all of
   * whose changes are stale answers 204 `Webhook-Stale: true` without `fn`, unless `{ handleStale: true }`.
   * Databases with interactive transactions only (not D1 or a Durable Object's storage).
   */
  order?: boolean | { handleStale?: boolean };
  /**
   * A second synchronous connection to the inbox's file, given to the inbox for `enqueue()` alone:
   * the deliveries are kept on it, each one autocommitted statement, with its busy_timeout set to 0
   * by the inbox (a lock held elsewhere fails at once, and is tried again after pauses with the
   * event loop free), so no BEGIN, COMMIT or pragma runs around each. Run nothing else on it. The
   * app's connection (the first argument) is not touched by a keep: the rest of the inbox (the
   * worker, `handle()`, listings) stays on it. A `TypeError` for a connection to another file, or
   * to `:memory:` (no other connection sees that database), or the inbox's connection itself.
   * Synchronous connections only (node:sqlite, better-sqlite3, bun:sqlite).
   *
   * @example
   * ```ts
   * const inbox = new SqliteInbox(new Database("app.db"), { scope: "audit-app", keepOn: new Database("app.db") });
   * ```
   */
  keepOn?: SqliteConnection;
}
