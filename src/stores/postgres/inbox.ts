// flag-webhooks/postgres: the transactional inbox (issue 17). The event id is written in the same
// transaction as the handler's writes, so they commit together or not at all. No runtime import
// of any Postgres client: `pg` (Pool or Client), postgres.js, or any client behind InboxClient is
// recognised by its shape, and their types are inferred from the client the user passes.

import { WebhookError } from "../../errors.js";
import type { WebhookEvent } from "../../events.js";
import type { WebhookReply } from "../../receiver.js";
import { answeredAsFailure } from "../../result-status.js";
import { parseDuration, TIMER_MAX } from "../../util/duration.js";
import type { ClaimResult, DedupeStore } from "../contract.js";

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

/** A `pg` Pool, by its shape: `connect()` lends a client with `release()`. */
interface PgPoolShape {
  totalCount: number;
  connect(): Promise<PgClientShape & { release(destroy?: boolean | Error): void }>;
  query(text: string, values?: unknown[]): Promise<{ rows: InboxRow[] }>;
}
/** A `pg` Client (or a client lent by a Pool), by its shape. */
interface PgClientShape {
  query(text: string, values?: unknown[]): Promise<{ rows: InboxRow[]; command?: string }>;
  on?(event: "error", listener: (error: unknown) => void): unknown;
  off?(event: "error", listener: (error: unknown) => void): unknown;
}
/** A postgres.js `sql`, by its shape. */
interface PostgresJsShape {
  begin(fn: (tx: PostgresJsShape) => Promise<unknown>): Promise<unknown>;
  unsafe(text: string, params?: unknown[]): PromiseLike<readonly InboxRow[]>;
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
   * that. At least the sender's retry horizon and `maxAge`. Default `"30d"`.
   */
  retention?: number | string;
  /**
   * How long a delivery waits for a copy of it being handled in another transaction, before
   * `409 delivery_in_progress` (Postgres `lock_timeout`). Default `"2s"`.
   */
  lockTimeout?: number | string;
  /**
   * The bound on each of the inbox's own steps (connect, check, BEGIN, insert, COMMIT) and the
   * `statement_timeout` of every statement in the transaction, the handler's included; past it,
   * `503 store_unavailable`. Default `"5s"`. At most 2³¹−1 ms (a timer waits no longer), else a
   * `TypeError`.
   */
  timeout?: number | string;
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

/** The inbox's view of a client: statements outside a transaction, and transactions. */
interface Driver {
  query(text: string, params: readonly unknown[]): Promise<readonly InboxRow[]>;
  /** Runs `body` in a transaction; `signal` aborts it (the connection is dropped, so Postgres rolls back). */
  transaction<T>(
    body: (
      tx: unknown,
      query: (text: string, params: readonly unknown[]) => Promise<readonly InboxRow[]>,
    ) => Promise<T>,
    signal: AbortSignal,
  ): Promise<T>;
  /** The transaction's last statement must be the inbox's own, to see a handler's swallowed error. */
  readonly checksCommit: boolean;
}

const SCOPE = /^[A-Za-z0-9._-]{1,100}$/;
const TABLE = /^(?:[A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/**
 * The answer to a copy of a committed event, as the receiver's own duplicate answer
 * (DUPLICATE_HEADER, spelt out: importing the receiver would bring it into this entry's bundle).
 */
const duplicate = (): WebhookReply => ({ status: 204, headers: { "webhook-duplicate": "true" } });
const PRUNE_BATCH = 10_000;

/** Thrown inside a transaction to roll it back, carrying why. */
class Rollback {
  constructor(
    readonly reason: "taken" | "threw" | "replied",
    readonly value?: unknown,
  ) {}
}

/**
 * The transactional inbox: the event id is inserted in the transaction the handler writes in, so
 * the id and the handler's writes commit together or not at all, whatever crashes. A copy of a
 * committed event answers a duplicate 204 without running the handler (one round trip); a copy
 * of an event being handled in another transaction waits up to `lockTimeout`, then answers
 * `409 delivery_in_progress`; a handler that throws or answers non-2xx rolls back, so the
 * sender's retry runs it again; Postgres unreachable answers `503 store_unavailable`. It is also
 * a lease-based {@link DedupeStore}, for handlers whose effects are not in Postgres.
 *
 * Takes a `pg` Pool or Client, a postgres.js `sql`, or an {@link InboxClient}; none is a
 * dependency of flag-webhooks.
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
export class PostgresInbox<Client extends PostgresClient = PostgresClient> implements DedupeStore {
  readonly #driver: Driver;
  readonly #scope: string;
  readonly #table: string;
  readonly #index: string;
  readonly #retention: number;
  readonly #lockTimeout: number;
  readonly #timeout: number;
  // The value of this instance's DedupeStore claims: release() deletes only rows holding it.
  // Stryker disable next-line MethodExpression: without slice(2) the token keeps "0." and is as unique.
  readonly #token = `claim.${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;

  constructor(client: Client, options: PostgresInboxOptions) {
    if (typeof options !== "object" || options === null) {
      throw new TypeError('flag-webhooks: PostgresInbox needs options with a "scope"');
    }
    const { scope, table = "flag_webhooks_inbox" } = options;
    if (typeof scope !== "string" || !SCOPE.test(scope)) {
      throw new TypeError('flag-webhooks: option "scope" must be 1-100 characters of A-Z, a-z, 0-9, ".", "_", "-"');
    }
    if (typeof table !== "string" || !TABLE.test(table)) {
      throw new TypeError('flag-webhooks: option "table" must be a table name, optionally "schema.table"');
    }
    this.#driver = driverFor(client);
    this.#scope = scope;
    this.#table = table
      .split(".")
      .map((part) => `"${part}"`)
      .join(".");
    this.#index = `"${table.split(".").pop()}_expires"`;
    this.#retention = parseDuration(options.retention ?? "30d", "retention");
    this.#lockTimeout = parseDuration(options.lockTimeout ?? "2s", "lockTimeout");
    this.#timeout = parseDuration(options.timeout ?? "5s", "timeout", TIMER_MAX);
    if (this.#lockTimeout >= this.#timeout) {
      throw new TypeError('flag-webhooks: option "lockTimeout" must be shorter than "timeout"');
    }
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
    const controller = new AbortController();
    await this.#driver.transaction(async (_tx, query) => {
      // "if not exists" answers an existing table or index with a NOTICE, which postgres.js
      // prints by default: on every start. Only for this transaction, so the client's own
      // setting is back after it.
      await query("set local client_min_messages = warning", []);
      // Two processes creating the table at once would collide in the catalog: one at a time.
      await query("select pg_advisory_xact_lock(hashtext('flag-webhooks migrate'))", []);
      await query(
        `create table if not exists ${this.#table} (
          scope text not null,
          id text not null,
          state text not null check (state in ('claimed', 'done')),
          token text,
          expires_at timestamptz not null,
          handled_at timestamptz not null default now(),
          primary key (scope, id)
        )`,
        [],
      );
      await query(`create index if not exists ${this.#index} on ${this.#table} (scope, expires_at)`, []);
    }, controller.signal);
  }

  /**
   * An `onEvent` that runs `fn(event, tx, ...context)` in a transaction with the event id: the
   * id and `fn`'s writes through `tx` commit together, once. Answers, in the receiver's terms: a
   * new event runs `fn`, commits, and answers `fn`'s reply (204 by default); a committed id answers
   * a duplicate 204 (`webhook-duplicate: true`) without running `fn`; an id in another open
   * transaction waits up to `lockTimeout`, then `409 delivery_in_progress`; `fn` throwing or
   * returning a non-2xx reply rolls back (its error or reply is the answer); Postgres failing, or
   * a COMMIT that did not commit, answers `503 store_unavailable`. A `createRouter()` router whose
   * handlers take `(event, tx)` is a valid `fn`.
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
    return async (event, ...context) => {
      const id = event.id;
      // The duplicate's one round trip: a committed, unexpired id. An id in an open transaction is
      // invisible here; the insert below waits for it.
      const state = await this.#state(id);
      if (state === "done") return duplicate();
      if (state === "claimed") throw inProgress(id);

      const controller = new AbortController();
      let timer: ReturnType<typeof setTimeout> | undefined;
      let fail: (error: unknown) => void = () => {};
      const expired = new Promise<never>((_, reject) => {
        fail = reject;
      });
      // Armed during the inbox's own steps, not while fn runs (a slow handler is the user's).
      const arm = () => {
        timer = setTimeout(() => {
          controller.abort();
          fail(new Error(`Postgres did not answer within ${this.#timeout} ms`));
        }, this.#timeout);
      };
      const disarm = () => clearTimeout(timer);
      arm();
      try {
        return await Promise.race([
          expired,
          this.#driver.transaction(async (tx, query) => {
            const rows = await query(
              `insert into ${this.#table} (scope, id, state, expires_at)
               select $1::text, $2::text, 'done', now() + $3::bigint * interval '1 millisecond'
               from (select set_config('lock_timeout', $4::text, true), set_config('statement_timeout', $5::text, true)) settings
               on conflict (scope, id) do update set state = 'done', token = null, expires_at = excluded.expires_at,
                 handled_at = now()
               where ${this.#table}.expires_at <= now()
               returning 1 as fresh`,
              [this.#scope, id, this.#retention, String(this.#lockTimeout), String(this.#timeout)],
            );
            // Another transaction committed this id while we waited for it.
            // Stryker disable next-line StringLiteral: only "threw" and "replied" are told apart; any other reason is this one.
            if (rows.length === 0) throw new Rollback("taken");
            // Answered 503 already (the client was slower than timeout): the handler must not run.
            if (controller.signal.aborted) throw new Error("timed out before the handler");
            disarm();
            let value: unknown;
            try {
              value = await fn(event, tx as InboxTransaction<Client>, ...context);
            } catch (error) {
              arm();
              throw new Rollback("threw", error);
            }
            arm();
            if (answeredAsFailure(value)) throw new Rollback("replied", value);
            // A handler that caught a failed statement leaves an aborted transaction, whose COMMIT
            // rolls back without an error on clients that do not check: this statement fails there.
            if (!this.#driver.checksCommit) await query("select 1", []);
            return value;
          }, controller.signal),
        ]);
      } catch (error) {
        if (error instanceof Rollback) {
          // A handler's statement that Postgres cancelled (statement_timeout) or lost its
          // connection: the store failed, not the handler.
          if (error.reason === "threw") throw storeFailure(error.value) ? unavailable(error.value) : error.value;
          if (error.reason === "replied") return error.value;
          if ((await this.#state(id)) === "done") return duplicate();
          throw inProgress(id);
        }
        if ((error as { code?: unknown } | null)?.code === "55P03") throw inProgress(id);
        throw unavailable(error);
      } finally {
        disarm();
      }
    };
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
      const count = Number(rows[0]?.count ?? 0);
      total += count;
      if (count < PRUNE_BATCH) return total;
    }
  }

  /** DedupeStore: claims `id` for `lease` ms in one statement (insert, or take over an expired row). */
  async claim(id: string, lease: number): Promise<ClaimResult> {
    const rows = await this.#driver.query(
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
       select case when state = 'done' then 'done' else 'in_flight' end from ${this.#table}
       where scope = $1::text and id = $2::text and not exists (select 1 from claim)`,
      [this.#scope, id, this.#token, Math.max(1, Math.ceil(lease))],
    );
    const result = rows[0]?.result;
    if (result === "claimed" || result === "done") return result;
    // "in_flight", or no row: another instance inserted it after this statement's snapshot.
    return "in_flight";
  }

  /** DedupeStore: marks `id` handled for `ttl` ms. */
  async complete(id: string, ttl: number): Promise<void> {
    await this.#driver.query(
      `insert into ${this.#table} (scope, id, state, expires_at)
       values ($1::text, $2::text, 'done', now() + $3::bigint * interval '1 millisecond')
       on conflict (scope, id) do update set state = 'done', token = null, expires_at = excluded.expires_at`,
      [this.#scope, id, Math.max(1, Math.ceil(ttl))],
    );
  }

  /** DedupeStore: frees this instance's claim on `id`; never another instance's, never a done id. */
  async release(id: string): Promise<void> {
    await this.#driver.query(
      `delete from ${this.#table} where scope = $1::text and id = $2::text and state = 'claimed' and token = $3::text`,
      [this.#scope, id, this.#token],
    );
  }

  /** The state of an unexpired id, or undefined; bounded by `timeout`, failures as 503. */
  async #state(id: string): Promise<string | undefined> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const rows = await Promise.race([
        this.#driver.query(
          `select state from ${this.#table} where scope = $1::text and id = $2::text and expires_at > now()`,
          [this.#scope, id],
        ),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`Postgres did not answer within ${this.#timeout} ms`)),
            this.#timeout,
          );
        }),
      ]);
      const state = rows[0]?.state;
      return typeof state === "string" ? state : undefined;
    } catch (error) {
      throw unavailable(error);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * A Postgres error that is the server's or the connection's, not the statement's: query_canceled
 * (statement_timeout), the connection exceptions (08…), operator intervention (57P…), too many
 * connections.
 */
function storeFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code === "57014" || code === "53300" || /^(08|57P)/.test(code));
}

function inProgress(id: string): WebhookError {
  return new WebhookError("delivery_in_progress", `event ${id} is being handled by another delivery; retry later`);
}

function unavailable(cause: unknown): WebhookError {
  return new WebhookError("store_unavailable", "the Postgres inbox is unavailable; retry later", { cause });
}

function driverFor(client: unknown): Driver {
  const c = client as Record<string, unknown> | null;
  if (c && typeof c.totalCount === "number" && typeof c.connect === "function") return pgPool(c as never);
  const sql = client as ((...args: never[]) => unknown) & { begin?: unknown; unsafe?: unknown };
  if (typeof sql === "function" && typeof sql.begin === "function" && typeof sql.unsafe === "function") {
    return postgresJs(client as never);
  }
  if (c && typeof c.transaction === "function" && typeof c.query === "function") return custom(c as never);
  if (c && typeof c.query === "function" && typeof c.connect === "function") return pgClient(c as never);
  throw new TypeError(
    "flag-webhooks: PostgresInbox needs a pg Pool or Client, a postgres.js sql, or an InboxClient (transaction, query)",
  );
}

/**
 * BEGIN, body, COMMIT on one pg client. COMMIT must answer COMMIT: an aborted transaction (a
 * handler that caught a failed statement) answers ROLLBACK, without an error. `onBroken` is told
 * when the connection may be unusable (BEGIN, COMMIT or ROLLBACK failed).
 */
async function pgTransaction<T>(
  client: PgClientShape,
  body: Parameters<Driver["transaction"]>[0],
  onBroken: () => void,
): Promise<T> {
  const query = async (text: string, params: readonly unknown[]) => (await client.query(text, [...params])).rows;
  const own = async (text: string) => {
    try {
      return await client.query(text);
    } catch (error) {
      onBroken();
      throw error;
    }
  };
  await own("begin");
  let value: T;
  try {
    value = (await body(client, query)) as T;
  } catch (error) {
    let rolledBack = true;
    await own("rollback").catch(() => {
      rolledBack = false;
    });
    // The connection failed under the handler (Postgres went away): the store's failure, not the
    // handler's, and Postgres rolls back on its side.
    if (!rolledBack && error instanceof Rollback && error.reason === "threw") {
      throw new Error("the connection to Postgres failed during the transaction", { cause: error.value });
    }
    throw error;
  }
  const commit = await own("commit");
  if (commit.command !== undefined && commit.command !== "COMMIT") {
    throw new Error(`the transaction did not commit (Postgres answered ${commit.command})`);
  }
  return value;
}

function pgPool(pool: PgPoolShape): Driver {
  return {
    checksCommit: true,
    query: async (text, params) => (await pool.query(text, [...params])).rows,
    async transaction(body, signal) {
      const client = await pool.connect();
      let released = false;
      const release = (destroy: boolean) => {
        if (released) return;
        released = true;
        client.release(destroy);
      };
      let broken = false;
      // Past the timeout, drop the connection: Postgres rolls back what it held.
      const abort = () => {
        broken = true;
        release(true);
      };
      if (signal.aborted) {
        abort();
        throw new Error("aborted: Postgres did not answer in time");
      }
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once, and the listener goes in finally.
      signal.addEventListener("abort", abort, { once: true });
      // A lent client whose server goes away between statements (Postgres restarted while the
      // handler awaits something else) emits "error", which the Pool listens for only on idle
      // clients: unheard, it would crash the process. Heard here, the client is dropped.
      const onError = () => {
        broken = true;
      };
      client.on?.("error", onError);
      try {
        return await pgTransaction(client, body, onError);
      } finally {
        // Stryker disable next-line StringLiteral: a listener left on finds the client released (release() runs once): abort() does nothing.
        signal.removeEventListener("abort", abort);
        release(broken);
        // A dropped client keeps the listener: it may still report its socket's end.
        if (!broken) client.off?.("error", onError);
      }
    },
  };
}

function pgClient(client: PgClientShape): Driver {
  // One connection: one transaction at a time, and nothing else meanwhile (a statement sent
  // during another delivery's transaction would run inside it).
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(run: () => Promise<T>): Promise<T> => {
    const next = queue.then(run, run);
    queue = next.catch(() => {});
    return next;
  };
  return {
    checksCommit: true,
    query: (text, params) => serial(async () => (await client.query(text, [...params])).rows),
    transaction: (body) => serial(() => pgTransaction(client, body, () => {})),
  };
}

function postgresJs(sql: PostgresJsShape): Driver {
  return {
    // postgres.js rolls back, and rejects, when any statement of the transaction failed.
    checksCommit: true,
    query: async (text, params) => [...(await sql.unsafe(text, [...params]))],
    transaction: async (body) =>
      (await sql.begin((tx) => body(tx, async (text, params) => [...(await tx.unsafe(text, [...params]))]))) as never,
  };
}

function custom(client: InboxClient<unknown>): Driver {
  return {
    checksCommit: false,
    query: (text, params) => client.query(text, params),
    transaction: (body) => client.transaction((tx) => body(tx, (text, params) => client.query(text, params, tx))),
  };
}
