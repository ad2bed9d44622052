// The types users meet in flag-webhooks/postgres: the clients the inbox takes, what a handler gets
// as `tx` for each, and the options. No runtime code, and no import of any Postgres client: each
// client is known by its shape, and its own types are inferred from the one the user passes.
import type { WebhookEvent } from "../../events.js";

/** Rows as a client returns them. */
export type InboxRow = Record<string, unknown>;

/**
 * Any other Postgres client, in two functions: an ORM or a driver the inbox does not know plugs in
 * through this (docs/postgres.md: recipes for Drizzle and Kysely). `Tx` is what the handler gets as `tx`.
 *
 * @example
 * ```ts
 * const client: InboxClient<pg.PoolClient> = {
 *   // BEGIN, fn, COMMIT; ROLLBACK and reject when fn rejects. Must reject if COMMIT did not commit.
 *   async transaction(fn) {
 *     const tx = await pool.connect();
 *     try {
 *       await tx.query("begin");
 *       const value = await fn(tx);
 *       await tx.query("commit");
 *       return value;
 *     } catch (error) {
 *       await tx.query("rollback").catch(() => {});
 *       throw error;
 *     } finally {
 *       tx.release();
 *     }
 *   },
 *   // One statement with $1, $2… parameters: in `tx` when given, else on its own.
 *   query: async (text, params, tx) => (await (tx ?? pool).query(text, [...params])).rows,
 * };
 * const inbox = new PostgresInbox(client, { scope: "audit-app" });
 * ```
 */
export interface InboxClient<Tx> {
  /** Runs `fn` in a transaction: commits when it resolves, rolls back and rejects when it rejects. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** Runs one statement with `$1`… parameters, in `tx` when given, and resolves with its rows. */
  query(text: string, params: readonly unknown[], tx?: Tx): Promise<readonly InboxRow[]>;
}

/**
 * What the handler gets as `tx` for a client: a `pg` Pool lends a `PoolClient`, a `pg` Client is
 * its own transaction, postgres.js gives its `TransactionSql`, an {@link InboxClient} its `Tx`.
 *
 * @example
 * ```ts
 * type Tx = InboxTransaction<pg.Pool>; // pg.PoolClient
 * const router = createRouter<[tx: InboxTransaction<typeof sql>]>(); // postgres.TransactionSql
 * ```
 */
export type InboxTransaction<Client> = Client extends {
  totalCount: number;
  // pg's Pool declares connect() twice; a type is inferred from the last declaration, the callback's.
  connect(callback: (error: never, client: infer Lent, done: never) => void): void;
}
  ? NonNullable<Lent>
  : Client extends { unsafe: unknown; begin(options: string, fn: (tx: infer Tx) => infer _R): unknown }
    ? Tx
    : Client extends InboxClient<infer Tx>
      ? Tx
      : Client extends { query: unknown; connect: unknown }
        ? Client
        : never;

/** A client {@link PostgresInbox} takes: `pg` Pool or Client, postgres.js `sql`, or an {@link InboxClient}. */
export type PostgresClient =
  | { totalCount: number; connect(): Promise<unknown>; query(...args: never[]): unknown }
  | { unsafe(...args: never[]): unknown; begin(...args: never[]): unknown }
  | { transaction(fn: never): unknown; query(...args: never[]): unknown }
  | { query(...args: never[]): unknown; connect(...args: never[]): unknown };

/** Options of {@link PostgresInbox}. */
export interface PostgresInboxOptions {
  /**
   * Which endpoint this inbox is for, required: 1-100 characters of `A-Z a-z 0-9 . _ -`. Two
   * endpoints sharing a database never dedupe against each other; every instance of one app uses
   * the same scope and shares its ids.
   */
  scope: string;
  /** The table, optionally schema-qualified (`"app.webhook_inbox"`). Default `"flag_webhooks_inbox"`. */
  table?: string;
  /**
   * How long `handle()` remembers a handled id, in ms or as a duration: `prune()` deletes it after
   * that. At least the sender's retry horizon, and `maxAge` plus two minutes of clock skew (a
   * receiver given a shorter one refuses it with a TypeError). Default `"30d"`.
   */
  retention?: number | string;
  /**
   * How long a delivery waits for a copy of it being handled in another transaction, before
   * `409 delivery_in_progress` (Postgres `lock_timeout`, for the inbox's own statements only: the
   * handler's statements wait for locks under the session's own setting). Default `"2s"`.
   */
  lockTimeout?: number | string;
  /**
   * The bound on each of the inbox's own steps (waiting for a connection, BEGIN, the claim, COMMIT)
   * and the `statement_timeout` of every statement in the transaction, the handler's included;
   * past it, `503 store_unavailable` with `Retry-After`. Default `"5s"`. At most 2³¹−1 ms (a timer waits no longer), else a
   * `TypeError`.
   */
  timeout?: number | string;
  /**
   * The clock keep-then-work reads (`enqueue()`, `work()`, `replay()`), in ms since the epoch:
   * every time it stores or compares. For tests. Default `Date.now`.
   */
  now?: () => number;
  /**
   * Apply each flag's changes in order, last writer wins per field (docs/order.md): the flag's
   * positions are read (its row locked) and written in the handler's transaction, in a table
   * beside the inbox's (`<table>_positions`, made by migrate()). `fn` sees only the fresh changes;
   * an event all of whose changes are stale answers 204 `Webhook-Stale: true` without `fn`,
   * unless `{ handleStale: true }`.
   */
  order?: boolean | { handleStale?: boolean };
}

/**
 * What `handle(fn)` runs: the event, the transaction, then what the adapter passes.
 *
 * @example
 * ```ts
 * const audit: InboxHandler<pg.PoolClient, []> = async (event, tx) => {
 *   await tx.query("insert into audit (event_id) values ($1)", [event.id]);
 * };
 * ```
 */
export type InboxHandler<Tx, Context extends unknown[]> = (event: WebhookEvent, tx: Tx, ...context: Context) => unknown;
