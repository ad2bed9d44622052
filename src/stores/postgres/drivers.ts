// The inbox's view of a Postgres client: statements on their own, and a transaction it can hold
// open while the receiver decides whether to commit. Each client the inbox takes (a `pg` Pool or
// Client, postgres.js, an InboxClient) is recognised by its shape; none is imported.
import { Nesting } from "../nested-transactions.js";
import { pgTx, postgresJsTx } from "./nested.js";
import type { InboxClient, InboxRow } from "./types.js";

/** A transaction held open on one connection until the inbox commits or rolls it back. */
export interface OpenTransaction {
  /** What the handler gets as `tx`. */
  readonly tx: unknown;
  /** One statement inside the transaction. */
  query(text: string, params: readonly unknown[]): Promise<readonly InboxRow[]>;
  /**
   * Runs `check` (a statement that fails unless this is still the transaction that began, and
   * not aborted) in the transaction, then COMMIT. Rejects when the transaction did not commit.
   */
  commit(check: string): Promise<void>;
  /** Rolls back. Never rejects: a connection that cannot roll back is dropped. */
  rollback(): Promise<void>;
  /** Gives up on the transaction at once (past the inbox's timeout): Postgres rolls it back. */
  abort(): void;
  /** Whether the connection was lost under the transaction: then what failed is the store, not the handler. */
  lost(): boolean;
  /** Throws when the handler left open a transaction it began through `tx` (a savepoint the inbox would commit). */
  finished(): void;
}

/** One statement with `$1`… parameters. */
export interface Statement {
  text: string;
  params: readonly (string | number)[];
}

/** A transaction just begun, and the rows of its first statement. */
export interface Begun {
  transaction: OpenTransaction;
  rows: readonly InboxRow[];
}

/** A client, as the inbox uses it. */
export interface Driver {
  /** One statement outside any transaction. */
  query(text: string, params: readonly unknown[]): Promise<readonly InboxRow[]>;
  /**
   * A connection of its own, BEGIN on it and `first` in the transaction (in one round trip where
   * the client can: pg). When `first` fails, the transaction is rolled back and the error thrown;
   * when `signal` aborts first (the inbox gave up waiting), the transaction is given up.
   */
  begin(first: Statement, signal: AbortSignal): Promise<Begun>;
  /** How many transactions it holds open at once (more wait for one to end). */
  readonly transactions: number;
}

/** A `pg` Pool, by its shape: `connect()` lends a client with `release()`. */
interface PgPoolShape {
  totalCount: number;
  options?: { max?: number };
  connect(): Promise<PgClientShape & { release(destroy?: boolean | Error): void }>;
  query(text: string, values?: unknown[]): Promise<{ rows: InboxRow[] }>;
}
/** A `pg` Client (or a client lent by a Pool), by its shape. */
interface PgClientShape {
  query(text: string, values?: unknown[]): Promise<PgResult | PgResult[]>;
  on?(event: "error", listener: (error: unknown) => void): unknown;
  off?(event: "error", listener: (error: unknown) => void): unknown;
}
interface PgResult {
  rows: InboxRow[];
  command?: string;
}
/** A postgres.js `sql`, by its shape. */
interface PostgresJsShape {
  begin(fn: (tx: PostgresJsShape) => Promise<unknown>): Promise<unknown>;
  unsafe(text: string, params?: unknown[]): PromiseLike<readonly InboxRow[]>;
}

/** The driver for any client the inbox takes; a TypeError for anything else, when the inbox is made. */
export function driverFor(client: unknown): Driver {
  const c = client as Record<string, unknown> | null;
  if (c && typeof c.totalCount === "number" && typeof c.connect === "function") return pgPool(c as never);
  const sql = client as ((...args: never[]) => unknown) & { begin?: unknown; unsafe?: unknown };
  if (typeof sql === "function" && typeof sql.begin === "function" && typeof sql.unsafe === "function") {
    return heldOpen(
      (fn) => (sql as unknown as PostgresJsShape).begin(fn as (tx: PostgresJsShape) => Promise<unknown>),
      async (tx, text, params) => [...(await (tx as PostgresJsShape).unsafe(text, [...params]))],
      async (text, params) => [...(await (sql as unknown as PostgresJsShape).unsafe(text, [...params]))],
      (tx, ended) => postgresJsTx(tx as never, ended),
      (sql as { options?: { max?: unknown } }).options?.max,
    );
  }
  if (c && typeof c.transaction === "function" && typeof c.query === "function") {
    const custom = client as InboxClient<unknown>;
    return heldOpen(
      (fn) => custom.transaction(fn),
      (tx, text, params) => custom.query(text, params, tx),
      (text, params) => custom.query(text, params),
    );
  }
  if (c && typeof c.query === "function" && typeof c.connect === "function") return pgClient(c as never);
  throw new TypeError(
    "flag-webhooks: PostgresInbox needs a pg Pool or Client, a postgres.js sql, or an InboxClient (transaction, query)",
  );
}

function rowsOf(result: PgResult | PgResult[]): InboxRow[] {
  return (Array.isArray(result) ? result.at(-1) : result)?.rows ?? [];
}

/**
 * A transaction on one `pg` client. COMMIT goes in one round trip with the check (pg sends a
 * statement without parameters as a simple query, which may hold several): if the check fails,
 * COMMIT is never run. `done(broken)` gives the connection back, or drops it when it is broken.
 */
function pgTransaction(
  client: PgClientShape,
  done: (broken: boolean) => void,
  lost: () => boolean = () => false,
): OpenTransaction {
  const nesting = new Nesting();
  // Once committed, rolled back or given up, the connection is no longer the transaction's (a
  // Pool lends it to the next one): a later COMMIT or ROLLBACK must not reach it, or it would end
  // that other transaction.
  let ended = false;
  const rollback = async () => {
    try {
      await client.query("rollback");
      done(false);
    } catch {
      done(true);
    }
  };
  return {
    tx: pgTx(client, nesting),
    query: async (text, params) => rowsOf(await client.query(text, [...params])),
    async commit(check) {
      if (ended) throw new Error("flag-webhooks: the inbox's transaction has already ended");
      ended = true;
      let results: PgResult | PgResult[];
      try {
        results = await client.query(`${check}; commit`);
      } catch (error) {
        await rollback();
        throw error;
      }
      done(false);
      const command = (Array.isArray(results) ? results.at(-1) : results)?.command;
      // A transaction aborted by a statement the handler caught answers ROLLBACK, without an error.
      if (command !== "COMMIT") throw new Error(`the transaction did not commit (Postgres answered ${command})`);
    },
    async rollback() {
      if (ended) return;
      ended = true;
      await rollback();
    },
    abort() {
      ended = true;
      done(true);
    },
    lost,
    finished: () => nesting.finished(),
  };
}

/**
 * BEGIN and `first` on a `pg` client, in one round trip: pg sends a statement without parameters
 * as a simple query, which may hold several, so `first`'s parameters go in as literals ({@link inline}).
 */
async function pgBegin(client: PgClientShape, first: Statement, signal: AbortSignal, transaction: OpenTransaction) {
  return firstOf(transaction, signal, async () => rowsOf(await client.query(`begin; ${inline(first)}`)));
}

/**
 * Runs a new transaction's first statement: the transaction and its rows; when it fails, the
 * transaction is rolled back (it may be open and aborted); when `signal` aborts meanwhile, it is
 * given up at once.
 */
async function firstOf(
  transaction: OpenTransaction,
  signal: AbortSignal,
  first: () => Promise<readonly InboxRow[]>,
): Promise<Begun> {
  const abort = () => transaction.abort();
  signal.addEventListener("abort", abort, { once: true });
  try {
    return { transaction, rows: await first() };
  } catch (error) {
    await transaction.rollback();
    throw error;
  } finally {
    signal.removeEventListener("abort", abort);
  }
}

/**
 * The statement a COMMIT runs first (see {@link OpenTransaction}'s commit): it raises unless this is
 * still transaction `xid` (a handler that ended it through `tx`, COMMIT or ROLLBACK, leaves another
 * or none), so a handler's writes are never taken for done outside the transaction that held the
 * event. `whose` names it in the error ("inbox", "worker"). An `xid` that is no number never matches.
 * `then`, a statement that belongs with the COMMIT (the flag's new positions), runs after the check
 * in the same statement: on every client one statement, so it adds no round trip.
 */
export function sameTransaction(xid: unknown, whose: string, then?: Statement): string {
  const id = typeof xid === "string" && /^\d+$/.test(xid) ? xid : "null";
  const after = then ? ` ${inline(then)};` : "";
  return `do $$ begin if txid_current_if_assigned() is distinct from ${id}::bigint then raise exception 'flag-webhooks: the ${whose}''s transaction was ended by the handler (a COMMIT or ROLLBACK through tx)'; end if;${after} end $$`;
}

/**
 * A statement with its parameters as literals: a number as it is, and text as the hex of its
 * UTF-8, decoded by Postgres (`convert_from(decode('…', 'hex'), 'UTF8')`), so that no character of
 * an event id ever reaches the SQL parser, whatever the server's string settings; collated as the
 * inbox's columns (else "C", from the encoding's `name`), or no index could serve a comparison.
 */
export function inline({ text, params }: Statement): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = params[Number(n) - 1];
    if (typeof value === "number" && Number.isFinite(value)) return String(value);
    if (typeof value === "string") {
      const hex = Array.from(encoder.encode(value), (byte) => byte.toString(16).padStart(2, "0")).join("");
      return `(convert_from(decode('${hex}', 'hex'), 'UTF8') collate "default")`;
    }
    throw new TypeError(`flag-webhooks: no literal for parameter $${n}`);
  });
}

const encoder = new TextEncoder();

function pgPool(pool: PgPoolShape): Driver {
  // The inbox never holds the pool's last connection for its transactions: a handler that also
  // queries the pool (rather than `tx`) always finds one, where holding them all would leave
  // every such handler waiting for the others, for ever under pg's default connectionTimeoutMillis.
  const transactions = Math.max(1, (pool.options?.max ?? 10) - 1);
  const slots = turns(transactions);
  return {
    transactions,
    query: async (text, params) => (await pool.query(text, [...params])).rows,
    async begin(first, signal) {
      const free = await slots();
      let client: Awaited<ReturnType<PgPoolShape["connect"]>>;
      try {
        client = await pool.connect();
      } catch (error) {
        free();
        throw error;
      }
      // A lent client whose server goes away between statements (Postgres restarted while the
      // handler awaits something else) emits "error", which the Pool listens for only on idle
      // clients: unheard, it would crash the process. Heard here, the client is dropped.
      let broken = false;
      const onError = () => {
        broken = true;
      };
      client.on?.("error", onError);
      let released = false;
      const done = (destroy: boolean) => {
        if (released) return;
        released = true;
        // A dropped client keeps the listener: it may still report its socket's end.
        if (!(destroy || broken)) client.off?.("error", onError);
        client.release(destroy || broken);
        free();
      };
      return pgBegin(
        client,
        first,
        signal,
        pgTransaction(client, done, () => broken),
      );
    },
  };
}

/**
 * At most `count` holders at a time: each call waits for a turn and resolves with the function
 * that gives it back (once; later calls do nothing).
 */
function turns(count: number): () => Promise<() => void> {
  let held = 0;
  const waiting: (() => void)[] = [];
  const take = (): (() => void) => {
    held++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      held--;
      waiting.shift()?.();
    };
  };
  return () => {
    if (held < count) return Promise.resolve(take());
    return new Promise((resolve) => waiting.push(() => resolve(take())));
  };
}

function pgClient(client: PgClientShape): Driver {
  // One connection: one transaction at a time, and nothing else meanwhile (a statement sent
  // during another delivery's transaction would run inside it).
  const turn = turns(1);
  return {
    transactions: 1,
    async query(text, params) {
      const free = await turn();
      try {
        return rowsOf(await client.query(text, [...params]));
      } finally {
        free();
      }
    },
    async begin(first, signal) {
      const free = await turn();
      let freed = false;
      const transaction = pgTransaction(client, () => {
        if (!freed) free();
        freed = true;
      });
      // The one connection is the user's: past the timeout it is not dropped but rolled back, after
      // whatever it is still running, and only then is the next transaction let in.
      return pgBegin(client, first, signal, { ...transaction, abort: () => void transaction.rollback() });
    },
  };
}

/**
 * A transaction on a client that runs it as a callback (postgres.js `sql.begin`, an
 * InboxClient's `transaction`): the callback is held open until the inbox decides, then runs the
 * check and returns (the client commits), or throws (the client rolls back).
 */
function heldOpen(
  transaction: (fn: (tx: unknown) => Promise<unknown>) => Promise<unknown>,
  inside: (tx: unknown, text: string, params: readonly unknown[]) => Promise<readonly InboxRow[]>,
  outside: (text: string, params: readonly unknown[]) => Promise<readonly InboxRow[]>,
  forHandler: ForHandler = (tx) => tx,
  max: unknown = undefined,
): Driver {
  return {
    // postgres.js's pool size (default 10); an InboxClient's is its own, unknown here.
    transactions: typeof max === "number" && max >= 1 ? max : Number.POSITIVE_INFINITY,
    query: outside,
    async begin(first, signal) {
      const open = await heldTransaction(transaction, inside, forHandler);
      return firstOf(open, signal, () => open.query(first.text, first.params));
    },
  };
}

/**
 * What the handler gets as `tx` of a client's transaction, and `ended()`, true once the inbox
 * decided it (committed, rolled back, or gave it up): a tx whose statements would then run
 * outside the transaction refuses them.
 */
type ForHandler = (tx: unknown, ended: () => boolean) => unknown;

/** A transaction on a client that runs it as a callback, held open (see {@link heldOpen}). */
function heldTransaction(
  transaction: (fn: (tx: unknown) => Promise<unknown>) => Promise<unknown>,
  inside: (tx: unknown, text: string, params: readonly unknown[]) => Promise<readonly InboxRow[]>,
  forHandler: ForHandler,
): Promise<OpenTransaction> {
  return new Promise<OpenTransaction>((opened, failed) => {
    let decided = false;
    let resolveDecision: (check: string | undefined) => void = () => {};
    const decision = new Promise<string | undefined>((resolve) => {
      resolveDecision = resolve;
    });
    const decide = (check: string | undefined) => {
      decided = true;
      resolveDecision(check);
    };
    let began = false;
    const ended = transaction(async (tx: unknown) => {
      began = true;
      opened({
        tx: forHandler(tx, () => decided),
        query: (text, params) => inside(tx, text, params),
        async commit(check) {
          decide(check);
          await ended;
        },
        async rollback() {
          decide(undefined);
          await ended.catch(() => {});
        },
        abort: () => decide(undefined),
        lost: () => false,
        finished: () => {},
      });
      const check = await decision;
      if (check === undefined) throw ROLLBACK;
      await inside(tx, check, []);
    });
    ended.catch((error: unknown) => {
      if (!began) failed(error);
    });
  });
}

/** What the held callback throws to have its client roll back. */
const ROLLBACK = new Error("flag-webhooks: rolled back by the inbox");
