// The transactional inbox on SQLite: the event id is written in the same transaction as the handler's
// writes, which commits only once the receiver decided the delivery was handled (its final answer is
// 2xx), before that answer leaves. On D1 and a Durable Object's storage, which cannot hold a
// transaction open, the handler returns its writes and they run at COMMIT, in one batch with the id.
import type { WebhookEvent } from "../../events.js";
import type { ClaimResult, DedupeStore } from "../../store-contract/dedupe-store.js";
import {
  duplicateReply,
  type Enlisted,
  inboxHandler,
  type Participation,
  runEnlisted,
} from "../../store-contract/enlist.js";
import { claimToken, storedId } from "../../store-contract/keys.js";
import { parseDuration, TIMER_MAX } from "../../util/duration.js";
import { withTimeout } from "../../util/timeout.js";
import { inboxBasics, inProgress, notKept, unavailable as unavailableOn } from "../inbox-shell.js";
import { runInOrder } from "../order/in-transaction.js";
import { Keep } from "../work/keep.js";
import { KeepingInbox } from "../work/methods.js";
import { keepStatements } from "../work/statements.js";
import { received } from "../work/states.js";
import { type BatchDriver, d1Driver, durableObjectDriver, isD1, isDurableObjectSql } from "./batch.js";
import { withinDeadline } from "./deadline.js";
import {
  asyncDriver,
  type InteractiveDriver,
  isAsyncClient,
  isConnection,
  type OpenTransaction,
  type Param,
  syncDriver,
} from "./drivers.js";
import { keepOnDriver, migrateKeep, SQLITE_DIALECT, sqliteKeep, tableParts } from "./keep.js";
import { numbered, type OrderOption, orderOption } from "./order.js";
import { DEFAULT_TABLE } from "./schema.js";
import { type InboxStatements, statementsFor } from "./statements.js";
import { isStoreFailure, turnExpired } from "./turns.js";
import type { InboxHandler, InboxTransaction, SqliteDatabase, SqliteInboxOptions, SqliteRow } from "./types.js";

const PRUNE_BATCH = 1000;

/**
 * The transactional inbox on SQLite: the event id is inserted in the transaction the handler
 * writes in, so the id and the handler's writes commit together or not at all, whatever crashes.
 * The receiver decides: the transaction commits when the delivery's final answer is 2xx, before
 * that answer leaves (503 if COMMIT fails), and rolls back otherwise, so the sender's retry runs
 * it again. A copy of a committed event answers a duplicate 204 without running the handler.
 * SQLite has one writer: the inbox runs one transaction at a time per connection, and a delivery
 * waits for its turn (and for the write lock another process holds) up to `timeout`, then
 * answers `503 store_unavailable`. It is also a lease-based {@link DedupeStore}.
 *
 * Takes `node:sqlite`'s `DatabaseSync`, a `better-sqlite3` or `bun:sqlite` `Database`, an
 * `@libsql/client` client, a Cloudflare D1 binding, or a Durable Object's `ctx.storage`; none is
 * a dependency of flag-webhooks.
 *
 * @example
 * ```ts
 * const inbox = new SqliteInbox(new DatabaseSync("app.db"), { scope: "audit-app" });
 * inbox.migrate();
 * app.post("/webhooks", webhookMiddleware({
 *   secret,
 *   onEvent: inbox.handle((event, tx) => {
 *     tx.prepare("insert into audit (event_id, type) values (?, ?)").run(event.id, event.type);
 *   }),
 * }));
 * ```
 */
export class SqliteInbox<Db extends SqliteDatabase = SqliteDatabase>
  extends KeepingInbox<InboxTransaction<Db>>
  implements DedupeStore
{
  readonly #interactive: InteractiveDriver | undefined;
  readonly #batch: BatchDriver | undefined;
  readonly #sql: InboxStatements;
  readonly #scope: string;
  readonly #retention: number;
  readonly #timeout: number;
  readonly #handlerTimeout: number;
  readonly #order: OrderOption | undefined;
  // The value of this instance's DedupeStore claims: release() deletes only rows holding it.
  readonly #token = claimToken();
  readonly #table: ReturnType<typeof tableParts>;

  constructor(db: Db, options: SqliteInboxOptions) {
    super();
    const basics = inboxBasics(options, "SqliteInbox");
    this.#scope = basics.scope;
    this.#sql = statementsFor(options.table ?? DEFAULT_TABLE);
    this.#retention = basics.retention;
    this.#timeout = basics.timeout;
    this.#handlerTimeout = parseDuration(options.handlerTimeout ?? "10s", "handlerTimeout", TIMER_MAX);
    const interactive = !isD1(db) && !isDurableObjectSql(db);
    this.#table = tableParts(options.table ?? DEFAULT_TABLE);
    this.#order = orderOption(options.order, options.table ?? DEFAULT_TABLE, interactive, this.#scope, this.#retention);
    if (isD1(db)) this.#batch = d1Driver(db);
    else if (isDurableObjectSql(db)) this.#batch = durableObjectDriver(db);
    else if (isAsyncClient(db)) this.#interactive = asyncDriver(db, options.table ?? DEFAULT_TABLE);
    else if (isConnection(db)) this.#interactive = syncDriver(db, this.#table.schema);
    else {
      throw new TypeError(
        "flag-webhooks: SqliteInbox needs a SQLite database: node:sqlite DatabaseSync, a better-sqlite3 or bun:sqlite Database, an @libsql/client client, a D1 binding or a Durable Object's ctx.storage",
      );
    }
    const { now = Date.now } = options;
    if (typeof now !== "function") throw new TypeError('flag-webhooks: option "now" must be a function');
    const keeping = keepOnDriver(options.keepOn, db, this.#table); // checked first: refused beside D1 too
    // Keep-then-work needs a transaction held open while a handler runs: not on D1 and Durable Objects.
    if (!this.#interactive) return;
    const settings = { name: "SQLite", ...basics, now, order: this.#order };
    const transactions = { begin: this.#begin.bind(this), commit: this.#commit.bind(this) };
    const keep = sqliteKeep(transactions, this.#interactive, this.#timeout, keeping);
    this.keepWith(new Keep(keep, keepStatements(this.#table.quoted, SQLITE_DIALECT), settings));
  }

  /**
   * Creates the table and its index if they are missing; silent, and safe to run at every start,
   * from several processes at once. Synchronous connections need no `await` (it resolves at once).
   *
   * @example
   * ```ts
   * await new SqliteInbox(db, { scope: "audit-app" }).migrate();
   * ```
   */
  async migrate(): Promise<void> {
    const create = this.#sql.create;
    if (this.#batch) {
      await this.#batch.batch(
        create.map((sql) => ({ sql, params: [] })),
        [],
      );
      return;
    }
    await this.#transaction(async (open) => {
      // The schema's list (what `flag-webhooks schema sqlite` prints), an old table brought up to date.
      const [table, ...indexes] = create;
      await open.run(table as string, []);
      await migrateKeep(open, this.#table);
      for (const sql of indexes) await open.run(sql, []);
      for (const statement of this.#order?.sql.create ?? []) await open.run(statement, []);
    });
  }

  /**
   * An `onEvent` that runs `fn(event, tx, ...context)` in a transaction with the event id: the id
   * and `fn`'s writes through `tx` commit together, once, when the receiver's final answer is 2xx
   * and before it leaves. A committed id, or one `enqueue()` kept (pending, running, parked),
   * answers a duplicate 204 (`webhook-duplicate: true`) without running `fn`; `fn` throwing, or any
   * answer but 2xx, rolls back; the database failing (locked past `timeout`, full, read-only,
   * gone), or a COMMIT that did not commit, answers `503 store_unavailable`. `fn` must not end the
   * transaction itself (no COMMIT, ROLLBACK or BEGIN through `tx`): the inbox sees it, and answers
   * 503 rather than a 2xx it cannot stand behind.
   *
   * On D1 and a Durable Object's storage, `fn(event, db, ...context)` returns the statements to
   * run (`db.prepare(sql).bind(...)`, or `[sql, ...bindings]`), and they run at COMMIT in one
   * atomic batch with the insert of the id. Called outside a receiver (a queue consumer), it
   * commits when `fn` resolves.
   *
   * @example
   * ```ts
   * // D1: the statements run in one batch with the event id, or not at all.
   * const inbox = new SqliteInbox(env.DB, { scope: "audit-app" });
   * const onEvent = inbox.handle((event, db) => [
   *   db.prepare("insert into audit (event_id, type) values (?, ?)").bind(event.id, event.type),
   * ]);
   * ```
   */
  handle<Context extends unknown[] = unknown[]>(
    fn: InboxHandler<Db, Context>,
  ): (event: WebhookEvent, ...context: Context) => Promise<unknown> {
    if (typeof fn !== "function") throw new TypeError("flag-webhooks: inbox.handle() takes a function");
    const run = fn as (event: WebhookEvent, tx: unknown, ...context: Context) => unknown;
    const batch = this.#batch;
    return inboxHandler<Context>(
      this.#retention,
      batch
        ? (delivery, event, ...context) => this.#handleBatch(delivery, batch, run, event, context)
        : (delivery, event, ...context) => this.#handleInteractive(delivery, run, event, context),
    );
  }

  /**
   * Deletes this scope's expired ids (handled ids past `retention`, DedupeStore ids past their
   * ttl, lapsed claims), 1,000 at a time, each batch in a transaction of its own (so deliveries
   * get their turns between them); resolves with how many. Schedule it (docs/sqlite.md).
   *
   * @example
   * ```ts
   * setInterval(() => inbox.prune().catch(console.error), 60 * 60 * 1000).unref();
   * ```
   */
  async prune(): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await this.#write(this.#sql.prune(PRUNE_BATCH), [this.#scope, Date.now()]);
      total += rows.length;
      if (rows.length >= PRUNE_BATCH) continue;
      // Positions of ordered flags expire with the ids: an event older than them is past maxAge.
      if (this.#order) await this.#write(this.#order.sql.prune, [this.#scope, Date.now(), this.#scope], false);
      return total;
    }
  }

  /** DedupeStore: claims `eventId` for `lease` ms (insert, or take over an expired row). */
  async claim(eventId: string, lease: number): Promise<ClaimResult> {
    const id = await storedId(eventId);
    const now = Date.now();
    const claim = [this.#scope, id, this.#token, now + Math.max(1, Math.ceil(lease)), now, now];
    const state = async (query: (sql: string, params: readonly Param[]) => Promise<SqliteRow[]>) => {
      if ((await query(this.#sql.claimLease, claim)).length > 0) return "claimed";
      const rows = await query(this.#sql.state, [this.#scope, id, now]);
      return received(rows[0]?.state) ? "done" : "in_flight";
    };
    if (this.#batch) {
      const batch = this.#batch;
      return state((sql, params) => batch.query(sql, params));
    }
    return this.#transaction((open) => state((sql, params) => open.query(sql, params)));
  }

  /** DedupeStore: marks `eventId` handled for `ttl` ms. */
  async complete(eventId: string, ttl: number): Promise<void> {
    const id = await storedId(eventId);
    const now = Date.now();
    await this.#write(this.#sql.complete, [this.#scope, id, now + Math.max(1, Math.ceil(ttl)), now], false);
  }

  /** DedupeStore: frees this instance's claim on `eventId`; never another instance's, never a done id. */
  async release(eventId: string): Promise<void> {
    const id = await storedId(eventId);
    await this.#write(this.#sql.release, [this.#scope, id, this.#token], false);
  }

  /** handle() on a database with interactive transactions. */
  async #handleInteractive<Context extends unknown[]>(
    delivery: Participation | undefined,
    fn: (event: WebhookEvent, tx: unknown, ...context: Context) => unknown,
    event: WebhookEvent,
    context: Context,
  ): Promise<unknown> {
    const id = await storedId(event.id);
    // A copy of a handled (or kept) id is answered from what is committed, without waiting for the
    // turn or the write lock: copies replayed at speed then cost a read each, and hold up nobody.
    const params = [this.#scope, id, Date.now()];
    const committed = (this.#interactive as InteractiveDriver).committed(this.#sql.state, params);
    if (received(committed?.[0]?.state)) return duplicateReply();
    const open = await this.#begin();
    let state: string | undefined;
    try {
      state = await this.#claimDone(open, id);
    } catch (error) {
      await open.rollback();
      throw unavailable(error);
    }
    if (state !== undefined) {
      await open.rollback();
      // Else claimed, unexpired, committed: a DedupeStore claim of this scope (the scope used both ways).
      if (received(state)) return duplicateReply();
      throw inProgress(event.id);
    }
    const unit: Enlisted = {
      commit: () => this.#commit(open),
      rollback: () => open.rollback(),
      retention: this.#retention,
    };
    const run = async (seen: WebhookEvent) => {
      const handled = fn(seen, open.tx as InboxTransaction<Db>, ...context);
      const value = await withinDeadline(open, this.#handlerTimeout, handled);
      open.finished();
      return value;
    };
    return this.#settle(delivery, unit, () => runInOrder(this.#order, numbered(open), event, run));
  }

  /** handle() on D1 or a Durable Object's storage: the handler's statements run at COMMIT, with the id. */
  async #handleBatch<Context extends unknown[]>(
    delivery: Participation | undefined,
    driver: BatchDriver,
    fn: (event: WebhookEvent, db: unknown, ...context: Context) => unknown,
    event: WebhookEvent,
    context: Context,
  ): Promise<unknown> {
    const id = await storedId(event.id);
    const now = Date.now();
    let rows: SqliteRow[];
    try {
      rows = await this.#bounded(driver.query(this.#sql.state, [this.#scope, id, now]));
    } catch (error) {
      throw unavailable(error);
    }
    if (received(rows[0]?.state)) return duplicateReply();
    if (rows[0]?.state === "claimed") throw inProgress(event.id);
    let statements: readonly unknown[] = [];
    const unit: Enlisted = {
      // A copy that committed first makes the insert fail on the primary key, and the batch with it.
      commit: () =>
        this.#bounded(
          driver.batch(
            [
              { sql: this.#sql.dropExpired, params: [this.#scope, id, Date.now()] },
              { sql: this.#sql.insertDone, params: [this.#scope, id, Date.now() + this.#retention, Date.now()] },
            ],
            statements,
          ),
        ),
      rollback: async () => {},
      retention: this.#retention,
    };
    return this.#settle(delivery, unit, async () => {
      statements = driver.check(await fn(event, driver.database, ...context));
      return undefined;
    });
  }

  /**
   * Enlists `unit` in the receiver's decision and runs the handler: the receiver commits or rolls
   * back; without a receiver, it commits when the handler resolves. A store's failure inside the
   * handler (a full disk, a locked or read-only file) answers 503, not 500.
   */
  #settle(delivery: Participation | undefined, unit: Enlisted, run: () => unknown): Promise<unknown> {
    return runEnlisted(
      delivery,
      unit,
      run,
      (error) => (isStoreFailure(error) ? unavailable(error) : error),
      unavailable,
    );
  }

  /**
   * The claim of `id` as done in `open`: undefined when claimed here, else the committed state of
   * the row there ("claimed": a DedupeStore lease); 503 when the INSERT kept nothing and met none.
   */
  async #claimDone(open: OpenTransaction, id: string): Promise<string | undefined> {
    const now = Date.now();
    const claimed = await open.query(this.#sql.claimDone, [this.#scope, id, now + this.#retention, now, now]);
    if (claimed.length > 0) return undefined;
    const state = (await open.query(this.#sql.state, [this.#scope, id, now]))[0]?.state;
    if (state === undefined) throw notKept(id, "SQLite");
    return String(state);
  }

  /** This connection's turn and the write lock, by `deadline` (`timeout` from now); 503 past it or on failure. */
  async #begin(deadline = Date.now() + this.#timeout): Promise<OpenTransaction> {
    const driver = this.#interactive as InteractiveDriver;
    try {
      return await driver.begin(deadline, () => turnExpired(this.#timeout));
    } catch (error) {
      throw unavailable(error);
    }
  }

  /** Runs `work` in a transaction of its own: committed when it resolves, rolled back when it rejects. */
  async #transaction<T>(work: (open: OpenTransaction) => Promise<T>): Promise<T> {
    const open = await this.#begin();
    let value: T;
    try {
      value = await this.#bounded(work(open));
    } catch (error) {
      await open.rollback();
      throw error;
    }
    await this.#commit(open);
    return value;
  }

  /**
   * COMMIT within the inbox's timeout. The driver stops trying at that deadline and rolls back, so
   * the call rejects only once the transaction is over: a 503 never leaves while the COMMIT might
   * still land. The bound a moment later is for a COMMIT that never answers (a remote libSQL).
   */
  #commit(open: OpenTransaction, by = Date.now() + this.#timeout): Promise<void> {
    const expired = () => new Error(`SQLite did not let the inbox commit within ${this.#timeout} ms`);
    return withTimeout(open.commit(by, expired), Math.max(0, by - Date.now()) + COMMIT_GRACE, expired);
  }

  /** One write on its own, in a transaction of its own where the database has them. */
  async #write(sql: string, params: readonly Param[], rows = true): Promise<SqliteRow[]> {
    if (this.#batch) {
      const batch = this.#batch;
      if (rows) return this.#bounded(batch.query(sql, params));
      await this.#bounded(batch.batch([{ sql, params }], []));
      return [];
    }
    return this.#transaction(async (open) => {
      if (rows) return open.query(sql, params);
      await open.run(sql, params);
      return [];
    });
  }

  #bounded<T>(work: Promise<T>): Promise<T> {
    return withTimeout(work, this.#timeout, () => new Error(`SQLite did not answer within ${this.#timeout} ms`));
  }
}

/** How long past its deadline a COMMIT may take to give up and roll back before the call rejects anyway. */
const COMMIT_GRACE = 1000;

const unavailable = (cause: unknown) => unavailableOn(cause, "SQLite");
