// The transactional inbox: the event id is written in the same transaction as the handler's
// writes, and that transaction commits only when the receiver has decided the delivery was
// handled (its final answer is 2xx), before that answer leaves.
import type { WebhookEvent } from "../../events.js";
import type { ClaimResult, DedupeStore } from "../../store-contract/dedupe-store.js";
import { duplicateReply, type Enlisted, inboxHandler, runEnlisted } from "../../store-contract/enlist.js";
import { claimToken, storedId } from "../../store-contract/keys.js";
import { parseDuration } from "../../util/duration.js";
import { withTimeout } from "../../util/timeout.js";
import { inboxBasics, inProgress, notKept, unavailable as unavailableOn } from "../inbox-shell.js";
import { orderedKey, type QueryInTransaction, runInOrder, type TransactionOrder } from "../order/in-transaction.js";
import { Keep } from "../work/keep.js";
import { KeepingInbox } from "../work/methods.js";
import { keepStatements } from "../work/statements.js";
import { RECEIVED, received, stateList } from "../work/states.js";
import { claimStatement } from "./claim-statement.js";
import { type Begun, type Driver, driverFor, type OpenTransaction, sameTransaction } from "./drivers.js";
import { postgresDialect, postgresKeep } from "./keep.js";
import { type FoldedPositions, orderSchema, type PositionsRows, positionsRows, prunePositions } from "./order.js";
import { RecentIds } from "./recent-ids.js";
import { DEFAULT_TABLE, inboxSchema, refuseEncoding } from "./schema.js";
import type { InboxHandler, InboxTransaction, PostgresClient, PostgresInboxOptions } from "./types.js";

const PRUNE_BATCH = 10_000;

/**
 * The transactional inbox: the event id is inserted in the transaction the handler writes in, so
 * the id and the handler's writes commit together or not at all, whatever crashes. The receiver
 * decides: the transaction commits when the delivery's final answer is 2xx, before that answer
 * leaves (503 if COMMIT fails), and rolls back otherwise, so the sender's retry runs it again. A
 * copy of a committed event answers a duplicate 204 without running the handler; a copy of an
 * event being handled in another transaction waits up to `lockTimeout`, then answers `409
 * delivery_in_progress`; Postgres unreachable answers `503 store_unavailable`. It is also a
 * lease-based {@link DedupeStore}, for handlers whose effects are not in Postgres.
 *
 * Takes a `pg` Pool or Client, a postgres.js `sql`, or an {@link InboxClient}; none is a dependency of flag-webhooks.
 *
 * @example
 * ```ts
 * const inbox = new PostgresInbox(pool, { scope: "audit-app" });
 * await inbox.migrate();
 * app.post("/webhooks", webhookMiddleware({
 *   secret,
 *   onEvent: inbox.handle(async (event, tx) => {
 *     await tx.query("insert into audit (event_id, type) values ($1, $2)", [event.id, event.type]);
 *   }),
 * }));
 * ```
 */
export class PostgresInbox<Client extends PostgresClient = PostgresClient>
  extends KeepingInbox<InboxTransaction<Client>>
  implements DedupeStore
{
  readonly #driver: Driver;
  readonly #scope: string;
  readonly #table: string;
  readonly #schema: readonly string[];
  readonly #retention: number;
  readonly #lockTimeout: number;
  readonly #timeout: number;
  // What this instance's DedupeStore claims start with: release() deletes only rows of its own.
  // Each claim adds a token of its own (`<instance token>/<claim token>/`), so that a claim whose
  // answer was lost can free itself and no other.
  readonly #token = `${claimToken()}/`;
  readonly #order: TransactionOrder | undefined; // With `order`: whether a wholly stale event runs fn
  readonly #positions: PositionsRows | undefined; // With `order`: its positions table
  readonly #met = new RecentIds(); // The ids handled or answered as duplicates lately: read before claiming

  constructor(client: Client, options: PostgresInboxOptions) {
    super();
    const basics = inboxBasics(options, "PostgresInbox");
    this.#scope = basics.scope;
    const schema = inboxSchema(options.table ?? DEFAULT_TABLE);
    this.#driver = driverFor(client);
    this.#table = schema.table;
    this.#schema = schema.statements;
    this.#retention = basics.retention;
    this.#lockTimeout = parseDuration(options.lockTimeout ?? "2s", "lockTimeout");
    this.#timeout = basics.timeout;
    // With `order`, positions are read by the claim (or a kept event's lock) and written at COMMIT.
    if (options.order) {
      const handleStale = (options.order as { handleStale?: unknown }).handleStale === true;
      this.#order = { handleStale, retention: this.#retention };
      this.#positions = positionsRows(this.#table, this.#scope, this.#retention);
    }
    if (this.#lockTimeout >= this.#timeout) {
      throw new TypeError('flag-webhooks: option "lockTimeout" must be shorter than "timeout"');
    }
    const { now = Date.now } = options;
    if (typeof now !== "function") throw new TypeError('flag-webhooks: option "now" must be a function');
    const settings = {
      name: "Postgres",
      scope: this.#scope,
      retention: this.#retention,
      timeout: this.#timeout,
      now,
      // With `order`, the worker orders each attempt in its transaction, as handle() does.
      order: this.#order,
    };
    this.keepWith(
      new Keep(
        postgresKeep(this.#driver, this.#positions),
        keepStatements(this.#table, postgresDialect(this.#lockTimeout)),
        settings,
      ),
    );
  }

  /**
   * Creates the table and its index if they are missing; safe to run at every start, from
   * several processes at once, and silent: no NOTICE reaches the client's log.
   *
   * @example
   * ```ts
   * await new PostgresInbox(pool, { scope: "audit-app" }).migrate();
   * ```
   */
  async migrate(): Promise<void> {
    // Two processes creating the table at once would collide in the catalog: one at a time.
    // And "if not exists" answers an existing table or index with a NOTICE, which postgres.js
    // prints by default, on every start: raised to warnings for this transaction only (SET LOCAL).
    const { transaction: open, rows } = await this.#driver.begin(
      {
        text: "select set_config('client_min_messages', 'warning', true), pg_advisory_xact_lock(hashtext('flag-webhooks migrate')), current_setting('server_encoding') as encoding",
        params: [],
      },
      new AbortController().signal,
    );
    try {
      // Stryker disable next-line OptionalChaining: a select with no FROM answers one row, always
      refuseEncoding(rows[0]?.encoding);
      for (const statement of this.#schema) await open.query(statement, []);
      for (const statement of this.#order ? orderSchema(this.#table) : []) await open.query(statement, []);
    } catch (error) {
      await open.rollback();
      throw error;
    }
    // Stryker disable next-line StringLiteral: an empty check runs nothing, as "select 1" checks nothing: migrate() runs no handler that could end its transaction
    await open.commit("select 1");
  }

  /**
   * An `onEvent` that runs `fn(event, tx, ...context)` in a transaction with the event id: the id
   * and `fn`'s writes through `tx` commit together, once, when the receiver's final answer is 2xx
   * and before it leaves. A committed id, or one `enqueue()` kept (pending, running, parked),
   * answers a duplicate 204 (`webhook-duplicate: true`) without running `fn`; an id in another open
   * transaction waits up to `lockTimeout`, then `409 delivery_in_progress`; `fn` throwing, or any
   * answer but 2xx (returned, or written through the framework), rolls back; Postgres failing, or a
   * COMMIT that did not commit, answers `503 store_unavailable`. `fn` must not end the transaction
   * itself (no COMMIT or ROLLBACK through `tx`): the inbox sees it, and answers 503 rather than a
   * 2xx it cannot stand behind. Called outside a receiver (a queue worker), it commits when `fn`
   * resolves. A `createRouter()` router whose handlers take `(event, tx)` is a valid `fn`.
   *
   * @example
   * ```ts
   * const router = createRouter<[tx: pg.PoolClient]>().on("flag.updated", async (event, tx) => {
   *   await tx.query("insert into audit (event_id, flag) values ($1, $2)", [event.id, event.data.flag]);
   * });
   * app.post("/webhooks", webhookMiddleware({ secret, onEvent: inbox.handle(router) }));
   * ```
   */
  handle<Context extends unknown[] = unknown[]>(
    fn: InboxHandler<InboxTransaction<Client>, Context>,
  ): (event: WebhookEvent, ...context: Context) => Promise<unknown> {
    if (typeof fn !== "function") throw new TypeError("flag-webhooks: inbox.handle() takes a function");
    return inboxHandler(this.#retention, async (delivery, event: WebhookEvent, ...context: Context) => {
      const id = await storedId(event.id);
      // A copy of an id met lately is answered from a plain read (see #state); a new one is claimed at once.
      if (this.#met.has(id) && received(await this.#state(id))) return duplicateReply();
      const flag = this.#positions ? await orderedKey(event) : undefined;
      const open = await this.#open(id, event.id, flag);
      if (open === "done") {
        this.#met.add(id);
        return duplicateReply();
      }
      const unit: Enlisted = {
        commit: () => this.#commit(open).then(() => this.#met.add(id)),
        rollback: () => open.transaction.rollback(),
        retention: this.#retention,
      };
      const tx = open.transaction.tx as InboxTransaction<Client>;
      return runEnlisted(
        delivery,
        unit,
        async () => {
          const run = (seen: WebhookEvent) => fn(seen, tx, ...context);
          // Stryker disable next-line ArrowFunction: Postgres's order has no positions reader (they come folded with the claim), so runInOrder never calls it
          const query: QueryInTransaction = (text, params) => open.transaction.query(text, params);
          const value = await runInOrder(this.#order, query, event, run, unavailable, open.folded);
          open.transaction.finished();
          return value;
        },
        // A statement Postgres cancelled (statement_timeout) or a connection lost under the
        // handler: the store failed, not the handler.
        (error) => (storeFailure(error) || open.transaction.lost() ? unavailable(error) : error),
        unavailable,
      );
    });
  }

  /**
   * Deletes this scope's expired ids (handled ids past `retention`, DedupeStore ids past their
   * ttl, lapsed claims), in batches; resolves with how many. Schedule it (docs/postgres.md: retention).
   *
   * @example
   * ```ts
   * setInterval(() => inbox.prune().catch(console.error), 60 * 60 * 1000).unref();
   * ```
   */
  async prune(): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await this.#driver.query(
        `with gone as (
           delete from ${this.#table} where ctid in (
             select ctid from ${this.#table} where scope = $1 and expires_at < now() limit ${PRUNE_BATCH}
           ) returning 1
         ) select count(*)::int as count from gone`,
        [this.#scope],
      );
      // Stryker disable next-line OptionalChaining: count(*) always answers one row
      const count = Number(rows[0]?.count ?? 0);
      total += count;
      if (count >= PRUNE_BATCH) continue;
      // Ordered flags' positions expire with the ids: an event older than them is past maxAge.
      if (this.#order) await this.#driver.query(prunePositions(this.#table), [this.#scope]);
      return total;
    }
  }

  /** DedupeStore: claims `eventId` for `lease` ms in one statement (insert, or take over an expired row). */
  async claim(eventId: string, lease: number): Promise<ClaimResult> {
    const id = await storedId(eventId);
    const token = `${this.#token}${claimToken()}/`;
    let rows: readonly Record<string, unknown>[];
    try {
      rows = await this.#claim(id, token, lease);
    } catch (error) {
      // It may have committed all the same (the connection broke before its answer came back): it holds
      // the id for nobody, so free it, this claim only, so the sender's retry is not kept waiting for the lease.
      void this.#free(id, token).catch(() => {});
      throw error;
    }
    const result = rows[0]?.result;
    if (result === "claimed" || result === "done") return result;
    // "in_flight", or no row: another instance inserted it after this statement's snapshot.
    return "in_flight";
  }

  /** The one statement of a claim: insert, or take over an expired row, returning the state. */
  #claim(id: string, token: string, lease: number): Promise<readonly Record<string, unknown>[]> {
    return this.#driver.query(
      `with claim as (
         insert into ${this.#table} (scope, id, state, token, expires_at)
         values ($1::text, $2::text, 'claimed', $3::text, now() + $4::bigint * interval '1 millisecond')
         on conflict (scope, id) do update set state = 'claimed', token = excluded.token,
           expires_at = excluded.expires_at, handled_at = now()
         where ${this.#table}.expires_at <= now()
         returning 'claimed'::text as result
       )
       select result from claim
       union all
       select case when state in ${stateList(RECEIVED)} then 'done' else 'in_flight' end from ${this.#table}
       where scope = $1::text and id = $2::text and not exists (select 1 from claim)`,
      [this.#scope, id, token, Math.max(1, Math.ceil(lease))],
    );
  }

  /** DedupeStore: marks `eventId` handled for `ttl` ms. */
  async complete(eventId: string, ttl: number): Promise<void> {
    const id = await storedId(eventId);
    await this.#driver.query(
      `insert into ${this.#table} (scope, id, state, expires_at)
       values ($1::text, $2::text, 'done', now() + $3::bigint * interval '1 millisecond')
       on conflict (scope, id) do update set state = 'done', token = null, expires_at = excluded.expires_at`,
      [this.#scope, id, Math.max(1, Math.ceil(ttl))],
    );
  }

  /** DedupeStore: frees this instance's claim on `eventId`; never another instance's, never a done id. */
  async release(eventId: string): Promise<void> {
    await this.#free(await storedId(eventId), this.#token);
  }

  /** Deletes the claim of `id` whose token starts with `token`: this instance's, or one claim's. */
  async #free(id: string, token: string): Promise<void> {
    await this.#driver.query(
      `delete from ${this.#table} where scope = $1::text and id = $2::text and state = 'claimed'
       and left(token, length($3::text)) = $3::text`,
      [this.#scope, id, token],
    );
  }

  /**
   * BEGIN and the claim of `id` (the stored form of `eventId`) as done, in that transaction (one
   * round trip on pg, two on the others), with the positions of `flag` (an ordered event's) read,
   * its row locked, in the same statement: the transaction, held open for the handler, and those
   * positions; `"done"` for a committed id; `409` while another transaction holds it past
   * `lockTimeout`; `503` when Postgres fails or any step is slower than `timeout`.
   */
  async #open(id: string, eventId: string, flag: string | undefined): Promise<Opened | "done"> {
    const ordered = flag !== undefined && this.#positions;
    let begun: Begun;
    const gaveUp = new AbortController();
    try {
      // A transaction that begins after we gave up (its connection came late) is rolled back; one
      // whose claim is still waiting then is given up.
      begun = await this.#bounded(
        this.#driver.begin(
          {
            text: claimStatement(this.#table, ordered || undefined),
            // The flag's key is $6, only when ordered (a client that binds parameters wants them all used).
            params: [this.#scope, id, this.#retention, String(this.#lockTimeout), String(this.#timeout)].concat(
              ordered ? [flag as string] : [],
            ),
          },
          gaveUp.signal,
        ),
        (late) => void late.transaction.rollback(),
        gaveUp,
      );
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === "55P03") throw inProgress(eventId);
      throw unavailable(error);
    }
    const { transaction, rows } = begun;
    const xid = rows[0]?.xid;
    // A string only from the claim's row (txid_current()); whether it is a number is sameTransaction's rule.
    if (typeof xid === "string") return { transaction, xid, folded: ordered ? ordered.folded(flag, rows) : undefined };
    await transaction.rollback();
    // No row: another transaction committed the id while this one waited for it, after this
    // statement's snapshot was taken; a new statement sees it (none: a trigger or rule dropped it).
    const state = rows[0]?.state ?? (await this.#state(id));
    if (received(state)) return "done";
    throw state === undefined ? notKept(eventId, "Postgres") : inProgress(eventId);
  }

  /**
   * COMMIT, once the transaction is still the one that claimed the id and is not aborted (a
   * handler that caught a failed statement, or ended the transaction itself through `tx`): else
   * it rolls back and rejects, and the delivery is answered 503 instead of a 2xx. The flag's new
   * positions, if any, are written by the check, after it passed.
   */
  async #commit(open: Opened): Promise<void> {
    const check = sameTransaction(open.xid, "inbox", open.folded?.statement);
    try {
      await this.#bounded(open.transaction.commit(check));
    } catch (error) {
      open.transaction.abort();
      throw error;
    }
  }

  /**
   * The state of an unexpired id, or undefined; bounded by `timeout`, failures as 503. One
   * statement outside any transaction: no BEGIN, no ROLLBACK, no lock taken or waited for. It sees
   * only what was committed when it began, and handle() marks an id done in the transaction that
   * holds the handler's writes: a done id seen here was committed with them, so the duplicate it
   * answers is never premature. Anything else (no row, an expired one, a claim, a copy whose
   * transaction has not committed yet) is only "not known to be done": the claim then decides.
   */
  async #state(id: string): Promise<unknown> {
    try {
      const rows = await this.#bounded(
        this.#driver.query(
          `select state from ${this.#table} where scope = $1::text and id = $2::text and expires_at > now()`,
          [this.#scope, id],
        ),
      );
      return rows[0]?.state;
    } catch (error) {
      throw unavailable(error);
    }
  }

  /** A step bounded by `timeout`; past it, `gaveUp` (if any) is aborted and `late` gets what still came. */
  #bounded<T>(work: Promise<T>, late?: (value: T) => void, gaveUp?: AbortController): Promise<T> {
    const expired = () => {
      gaveUp?.abort();
      return new Error(`Postgres did not answer within ${this.#timeout} ms`);
    };
    return withTimeout(work, this.#timeout, expired, late);
  }
}

/**
 * A Postgres error that is the server's or the connection's, not the statement's: query_canceled
 * (statement_timeout), the connection exceptions (08…), operator intervention (57P…), too many
 * connections.
 */
function storeFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // Stryker disable next-line ConditionalExpression: a code that is no string matches none of these (the type check is for the compiler)
  return typeof code === "string" && (code === "57014" || code === "53300" || /^(08|57P)/.test(code));
}

const unavailable = (cause: unknown) => unavailableOn(cause, "Postgres");

/** A transaction that claimed an event id, and its flag's positions (read with the claim) when ordered. */
type Opened = { transaction: OpenTransaction; xid: string; folded: FoldedPositions | undefined };
