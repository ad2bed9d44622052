// The inbox's view of a SQLite database with interactive transactions: a synchronous connection
// (node:sqlite, better-sqlite3, bun:sqlite, or any SqliteConnection) or an asynchronous client
// (@libsql/client). Each is recognised by its shape; none is imported. A transaction is taken
// with BEGIN IMMEDIATE, so the write lock is held from the start (never upgraded later, which
// could fail at once with SQLITE_BUSY), and marked with a savepoint, so that COMMIT can see
// whether the handler ended the inbox's transaction itself.
import { withTimeout } from "../../util/timeout.js";
import { beginWrite, lockProbe, type WriteTransaction } from "./libsql-begin.js";
import { libsqlTx, syncTx } from "./nested.js";
import { turnsOf } from "./turns.js";
import type { SqliteAsyncClient, SqliteAsyncTransaction, SqliteConnection, SqliteRow } from "./types.js";
import {
  busyTimeoutOn,
  oneStatement,
  oneWrites,
  preparedOn,
  readWithoutWaiting,
  type SyncShape,
  untilLocked,
  walOn,
  withoutWaiting,
} from "./without-waiting.js";

/** A value a statement of the inbox binds. */
export type Param = string | number | null;

/** A transaction held open until the inbox commits or rolls it back. */
export interface OpenTransaction {
  /** What the handler gets as `tx`. */
  readonly tx: unknown;
  /** One statement inside the transaction that returns rows (a SELECT, or a write with RETURNING). */
  query(sql: string, params: readonly Param[]): Promise<SqliteRow[]>;
  /** One statement inside the transaction that returns none. */
  run(sql: string, params: readonly Param[]): Promise<void>;
  /**
   * COMMIT, once the inbox's savepoint is still there (else the handler ended the transaction):
   * rejects, after rolling back, when the transaction did not commit. Gives the turn back. A
   * COMMIT that must wait for readers (a rollback journal) is tried again until `deadline` (ms
   * since the epoch), then rejects with `expired()`.
   */
  commit(deadline: number, expired: () => unknown): Promise<void>;
  /** Rolls back. Never rejects. Gives the turn back. */
  rollback(): Promise<void>;
  /** Throws when the handler left open a transaction it began through `tx` (a savepoint the inbox would commit). */
  finished(): void;
}

/** A database with interactive transactions, as the inbox uses it. */
export interface InteractiveDriver {
  /** Takes this connection's turn and the write lock, waiting for either until `deadline`. */
  begin(deadline: number, expired: () => unknown): Promise<OpenTransaction>;
  /**
   * The rows of a read of committed rows only, made at once without the turn or any lock; or
   * undefined when it cannot be made so now (a transaction of the inbox is open on the
   * connection, whose uncommitted rows the read would see, or the file is locked or failing).
   */
  committed(sql: string, params: readonly Param[]): SqliteRow[] | undefined;
  /**
   * One statement in a transaction of its own, committed before it resolves with its rows, where
   * no handler runs (keeping events, a worker's take and failure marks): the turn and the write
   * lock are waited for until `deadline`, as by `begin`, and never tried once `bound` is
   * abandoned (rejects with `expired()`). Absent, `begin` and `commit` do it.
   */
  write?(
    sql: string,
    params: readonly Param[],
    deadline: number,
    expired: () => unknown,
    bound?: { abandoned(): boolean },
  ): Promise<SqliteRow[]>;
  /**
   * `write` made now, synchronously, when it can be at once: the rows, committed; undefined when
   * the turn or the write lock is held (then `write` waits for them), or `bound` is abandoned.
   */
  writeNow?(sql: string, params: readonly Param[], bound?: { abandoned(): boolean }): SqliteRow[] | undefined;
}

/** The savepoint that marks the inbox's transaction; gone if the handler ended it. */
const MARK = "flag_webhooks_inbox";

/** Whether `db` is a synchronous connection ({@link SqliteConnection}). */
export function isConnection(db: unknown): db is SqliteConnection {
  const c = db as Record<string, unknown> | null;
  return typeof c?.prepare === "function" && typeof c.exec === "function";
}

/** Whether `db` is an asynchronous client in the shape of `@libsql/client`. */
export function isAsyncClient(db: unknown): db is SqliteAsyncClient {
  const c = db as Record<string, unknown> | null;
  return typeof c?.execute === "function" && typeof c.transaction === "function";
}

/**
 * The driver for a synchronous connection. Every statement is synchronous, so nothing else runs
 * between the inbox's own; the turn keeps a second transaction (or a statement of the inbox's)
 * out while a handler awaits inside one.
 */
export function syncDriver(db: SqliteConnection, schema: string): InteractiveDriver {
  const connection = db as unknown as SyncShape;
  const statement = preparedOn(connection);
  const busyTimeout = busyTimeoutOn(connection);
  const rollback = () => {
    try {
      connection.exec("rollback");
    } catch {
      // No transaction left to roll back: SQLite or the handler already ended it.
    }
  };
  const turns = turnsOf(db);
  return {
    committed: (sql, params) =>
      turns.free ? readWithoutWaiting(connection, busyTimeout, () => statement(sql).all(...params)) : undefined,
    ...oneWrites(turns, oneStatement(connection, statement, walOn(connection, schema), busyTimeout)),
    async begin(deadline, expired) {
      const free = await turns.take(deadline, expired);
      // The app's own busy_timeout, read once, and put back after each statement run without it.
      let previous: number;
      try {
        previous = busyTimeout();
        await untilLocked(
          () => withoutWaiting(connection, previous, () => connection.exec(`begin immediate; savepoint ${MARK}`)),
          deadline,
          expired,
        );
      } catch (error) {
        free();
        throw error;
      }
      let ended = false;
      const end = () => {
        ended = true;
        free();
      };
      return {
        ...syncTx(db, () => !ended),
        query: async (sql, params) => statement(sql).all(...params),
        run: async (sql, params) => void statement(sql).run(...params),
        async commit(commitBy, expired) {
          if (ended) throw alreadyEnded();
          try {
            try {
              connection.exec(`release ${MARK}`);
            } catch (error) {
              throw handlerEnded(error);
            }
            // On a rollback journal COMMIT waits for the readers of the file: without the
            // busy_timeout, which would wait with the event loop stopped, and again after pauses
            // (a failed COMMIT leaves the transaction open, to try again). One that still fails
            // (the readers stay, a full disk) is rolled back, and the delivery is not handled.
            await untilLocked(
              () => withoutWaiting(connection, previous, () => connection.exec("commit")),
              commitBy,
              expired,
            );
          } catch (error) {
            rollback();
            throw error;
          } finally {
            end();
          }
        },
        async rollback() {
          if (ended) return;
          rollback();
          end();
        },
      };
    },
  };
}

/**
 * The driver for an asynchronous client (`@libsql/client`): `beginWrite` takes the write lock (on
 * a local file, on a connection of its own, with SQLite's wait at 0 there and the app's value put
 * back on it), tried again after pauses until the deadline (`untilLocked`, as the synchronous
 * drivers do), and COMMIT, which on a rollback journal waits for the file's readers, likewise.
 * Each step is bounded by the deadline.
 */
export function asyncDriver(client: SqliteAsyncClient, table: string): InteractiveDriver {
  const turns = turnsOf(client);
  const probe = lockProbe(table);
  // Stryker disable next-line ConditionalExpression,BooleanLiteral: a libSQL server's path (sqld), which no test starts: unmeasured, not equivalent
  const local = (client as { protocol?: unknown }).protocol === "file";
  const run = async (on: SqliteAsyncTransaction, sql: string, params: readonly Param[]) =>
    rowsOf((await on.execute({ sql, args: params as never[] })).rows);
  return {
    // The client's reads run on a connection of their own, but libSQL runs a local file's
    // statements synchronously: a read that waits for a lock would stop the event loop.
    committed: () => undefined,
    async begin(deadline, expired) {
      const free = await turns.take(deadline, expired);
      const attempt = () => beginOnce(client, local, probe, deadline, expired);
      let write: WriteTransaction;
      try {
        write = local ? await untilLocked(attempt, deadline, expired) : await attempt();
      } catch (error) {
        free();
        throw error;
      }
      const { tx } = write;
      let ended = false;
      // Each way out gives the connection back (with the app's busy_timeout) before the turn goes on.
      const end = async (how: () => Promise<void>) => {
        // Stryker disable next-line ConditionalExpression: only rollback() reaches an ended transaction here (commit() refuses first); its ROLLBACK of a closed transaction fails and is ignored, and the turn is given back once
        if (ended) return;
        ended = true;
        try {
          await how();
        } finally {
          tx.close();
          free();
        }
      };
      try {
        // Stryker disable next-line ArrayDeclaration: libSQL binds no argument to a statement with no parameter
        await run(tx, `savepoint ${MARK}`, []);
      } catch (error) {
        await end(write.rollback);
        throw error;
      }
      return {
        ...libsqlTx(tx, () => !ended),
        query: (sql, params) => run(tx, sql, params),
        run: async (sql, params) => void (await run(tx, sql, params)),
        commit: async (commitBy, commitExpired) => {
          if (ended) throw alreadyEnded();
          await end(async () => {
            try {
              // Stryker disable next-line ArrayDeclaration: libSQL binds no argument to a statement with no parameter
              await run(tx, `release ${MARK}`, []);
            } catch (error) {
              await write.rollback();
              throw handlerEnded(error);
            }
            // Stryker disable next-line ConditionalExpression,BlockStatement: a libSQL server's path (sqld), which no test starts: unmeasured, not equivalent
            if (!local) return tx.commit();
            // A COMMIT that failed busy (a rollback journal's readers) leaves the transaction open
            // to try again after a pause, with the event loop free meanwhile.
            try {
              await untilLocked(write.commit, commitBy, commitExpired);
            } catch (error) {
              await write.rollback();
              throw error;
            }
          });
        },
        rollback: () => end(write.rollback).catch(() => {}),
      };
    },
  };
}

/** One try of a libSQL client's write lock (`beginWrite`), bounded by the deadline. */
async function beginOnce(
  client: SqliteAsyncClient,
  local: boolean,
  probe: string,
  deadline: number,
  expired: () => unknown,
): Promise<WriteTransaction> {
  const left = Math.max(1, deadline - Date.now());
  // A transaction begun after its delivery gave up is ended, its connection given back as it was.
  return withTimeout(beginWrite(client, local, probe), left, expired, (late) => void late.rollback());
}

/** A client's rows (libSQL's Row objects read by column name, as records). */
function rowsOf(rows: ArrayLike<unknown>): SqliteRow[] {
  return Array.from(rows) as SqliteRow[];
}

/** A COMMIT of a transaction that already ended: refused, since its connection may hold the next one. */
function alreadyEnded(): Error {
  return new Error("flag-webhooks: the inbox's transaction has already ended");
}

/**
 * The inbox's savepoint is gone: the handler ended the transaction (a COMMIT, ROLLBACK or BEGIN
 * through `tx`), or SQLite rolled it back (a full disk, an I/O error).
 */
function handlerEnded(cause: unknown): Error {
  return new Error(
    "flag-webhooks: the inbox's transaction was ended before its COMMIT (by the handler, a COMMIT or ROLLBACK through tx, or by SQLite after an error)",
    { cause },
  );
}
