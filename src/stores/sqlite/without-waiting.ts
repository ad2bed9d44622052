// A synchronous connection's statements that never wait for a lock with the event loop stopped:
// each lock another connection holds (BEGIN IMMEDIATE, a rollback journal's COMMIT, a read) is
// tried with the busy_timeout at 0, and tried again after pauses, the app's own busy_timeout put
// back at once; and the one-statement writes of keep-then-work built on them (on WAL, in a
// transaction begun by a read, where SQLite never waits by the busy_timeout: no pragma set).
import { busyTimeoutOf } from "./busy-timeout.js";
import type { InteractiveDriver, Param } from "./drivers.js";
import { isBusy, pause, type Turns } from "./turns.js";
import type { SqliteRow } from "./types.js";

/** The longest pause between two tries of the write lock another process holds. */
const MOST_PAUSE = 25;

/** A synchronous connection, by its shape. */
export interface SyncShape {
  prepare(sql: string): { all(...params: Param[]): SqliteRow[]; run(...params: Param[]): unknown };
  exec(sql: string): unknown;
}

/**
 * Reads the connection's busy_timeout (the app's own, to put back), through a statement prepared
 * at the first read (a pragma's first run gives the value it was prepared with).
 */
export function busyTimeoutOn(connection: SyncShape): () => number {
  const read = pragmaOn(connection, "pragma busy_timeout");
  return () => busyTimeoutOf({ timeout: read() });
}

/** How a one-statement write learns about the inbox's database, for {@link inDeferred}. */
export interface Wal {
  /**
   * Whether the database is in WAL mode now, asked at each write: the app may switch its file's
   * journal mode on this connection at any time, and nothing cheaper tells (the data_version moves
   * at a first switch out of WAL, not at a second). Asking takes no lock and begins no transaction.
   */
  now(): boolean;
  /** The read that begins inDeferred's transaction: the database's data_version, which reads no table. */
  begin(): void;
}

/** The journal mode and the data_version of the inbox's database (`schema`: `"name".`, or "" for main). */
export function walOn(connection: SyncShape, schema: string): Wal {
  const mode = pragmaOn(connection, `pragma ${schema}journal_mode`);
  const version = pragmaOn(connection, `pragma ${schema}data_version`);
  return {
    now: () => String(mode()).toLowerCase() === "wal",
    begin: () => void version(),
  };
}

/**
 * A pragma's value, read through a statement prepared at the first read: the value alone where
 * the driver plucks it (better-sqlite3), sparing a row object on every write; else the row's
 * first column. SQLite compiles a pragma again at each run, so each read sees the current value.
 */
function pragmaOn(connection: SyncShape, sql: string): () => unknown {
  let read: (() => unknown) | undefined;
  return () => {
    // Stryker disable next-line ConditionalExpression: a cache; a pragma prepared again reads the same current value
    if (!read) {
      const statement = connection.prepare(sql) as Partial<Plucks> & ReturnType<SyncShape["prepare"]>;
      // Stryker disable next-line StringLiteral: typeof is never "", so the row's first column is read, the same value
      const plucked = typeof statement.pluck === "function" ? statement.pluck() : undefined;
      read = plucked ? () => plucked.get() : () => Object.values(statement.all()[0] ?? {})[0];
    }
    return read();
  };
}

/** A better-sqlite3 statement's pluck(): its reads give the first column's value alone. */
interface Plucks {
  pluck(): { get(): unknown };
}

/**
 * Tries BEGIN IMMEDIATE without waiting, again and again until `deadline`, pausing a few ms
 * between tries: a lock another process holds is waited for without blocking this process (a
 * synchronous driver's own busy_timeout would stop its event loop for as long as it waits). No
 * try once `bound` is abandoned: a synchronous attempt commits in the tick it starts, so a
 * delivery answered 503 meanwhile is never kept after its answer.
 */
export async function untilLocked<T>(
  attempt: () => T | Promise<T>,
  deadline: number,
  expired: () => unknown,
  bound?: { abandoned(): boolean },
): Promise<T> {
  // Stryker disable next-line MethodExpression,ArithmeticOperator: the pauses' lengths between tries, which only a timed assertion would see
  for (let wait = 1; ; wait = Math.min(MOST_PAUSE, wait * 2)) {
    if (bound?.abandoned()) throw expired();
    try {
      return await attempt();
    } catch (error) {
      if (!isBusy(error)) throw error;
      // Stryker disable next-line EqualityOperator: the one millisecond at the deadline itself
      if (Date.now() >= deadline) throw expired();
    }
    // The last pause ends at the deadline, for one more try: given up only once `timeout` passed.
    // Stryker disable next-line ArithmeticOperator: the last pause past the deadline by at most MOST_PAUSE ms, then expired as before
    await pause(Math.min(wait, deadline - Date.now()));
  }
}

/**
 * A synchronous driver's `write` and `writeNow`, around `transaction` (one statement in a
 * transaction of its own, committed, or a BUSY error when the lock is held elsewhere).
 */
export function oneWrites(
  turns: Turns,
  transaction: (sql: string, params: readonly Param[]) => SqliteRow[],
): Pick<InteractiveDriver, "write" | "writeNow"> {
  return {
    async write(sql, params, deadline, expired, bound) {
      const free = await turns.take(deadline, expired);
      return untilLocked(() => transaction(sql, params), deadline, expired, bound).finally(free);
    },
    // No await: a delivery alone pays for no promise and no timer (the lock held elsewhere: `write`).
    // The turn held and given back in this call, with no giver made for it.
    writeNow(sql, params, bound) {
      if (bound?.abandoned() || !turns.holdNow()) return undefined;
      try {
        return transaction(sql, params);
      } catch (error) {
        if (isBusy(error)) return undefined;
        throw error;
      } finally {
        turns.giveBack();
      }
    },
  };
}

/** A connection's statements, each prepared once. */
export function preparedOn(connection: SyncShape): (sql: string) => ReturnType<SyncShape["prepare"]> {
  const statements = new Map<string, ReturnType<SyncShape["prepare"]>>();
  return (sql) => {
    let prepared = statements.get(sql);
    // Stryker disable next-line ConditionalExpression: a cache; a statement prepared again is the same statement
    if (!prepared) {
      prepared = connection.prepare(sql);
      statements.set(sql, prepared);
    }
    return prepared;
  };
}

/**
 * `sql` (one statement) in a transaction of its own, committed, for a driver's `write`, with the
 * busy_timeout at 0 (`previous` put back after), to be tried again while the lock is held
 * elsewhere: a lock is never waited for with the event loop stopped. BEGIN IMMEDIATE, the statement
 * and COMMIT run at once, with no await between them, so nothing can run inside this
 * transaction, or end it: it needs no savepoint to be checked at COMMIT (that mark is for a
 * handler, which may), and the busy_timeout is set to 0 once around all three rather than around
 * each. A lock held elsewhere (BUSY at BEGIN, or at a rollback journal's COMMIT) rolls it all
 * back, to be tried again whole. A BEGIN that fails rolls nothing back. BEGIN rather than a statement on its own: inside a
 * transaction the app left open it fails, where a lone statement would join that transaction
 * and not be committed before its answer; and never a lone statement even with no transaction
 * open: while an app's write statement is still being stepped (node:sqlite allows it), SQLite
 * defers a lone statement's commit to that statement's end, where an explicit COMMIT fails. The
 * busy_timeout is set by `exec`, not by a prepared `pragma`: SQLite applies that pragma when it is
 * prepared, so a prepared one that then failed to run would leave the app's value at 0.
 */
export function inOne(
  connection: SyncShape,
  statement: (sql: string) => ReturnType<SyncShape["prepare"]>,
  previous: number,
  sql: string,
  params: readonly Param[],
): SqliteRow[] {
  // The busy_timeout set to 0 and back in the same call as BEGIN and as COMMIT (one exec each),
  // rather than on its own around each.
  const restore = () => connection.exec(`pragma busy_timeout = ${previous}`);
  // Stryker disable next-line ConditionalExpression: with the app's busy_timeout at 0, setting it to 0 first changes nothing
  if (previous === 0) statement("begin immediate").run();
  else {
    try {
      connection.exec("pragma busy_timeout = 0; begin immediate");
    } catch (error) {
      restore();
      throw error;
    }
  }
  try {
    const rows = statement(sql).all(...params);
    // Stryker disable next-line ConditionalExpression: with the app's busy_timeout at 0, putting 0 back changes nothing
    if (previous === 0) statement("commit").run();
    else connection.exec(`commit; pragma busy_timeout = ${previous}`);
    return rows;
  } catch (error) {
    try {
      connection.exec("rollback");
    } catch {
      // SQLite already rolled back (an I/O error, a full disk): nothing is open.
    }
    // Stryker disable next-line ConditionalExpression: restore() puts back the app's value, 0 when it is 0
    if (previous !== 0) restore();
    throw error;
  }
}

/**
 * One statement in a transaction of its own, for a driver's `write`: on WAL with no pragma set
 * (`inDeferred`), else with the busy_timeout at 0 around BEGIN IMMEDIATE and COMMIT (`inOne`).
 */
export function oneStatement(
  connection: SyncShape,
  statement: (sql: string) => ReturnType<SyncShape["prepare"]>,
  wal: Wal,
  busyTimeout: () => number,
): (sql: string, params: readonly Param[]) => SqliteRow[] {
  return (sql, params) =>
    wal.now() ? inDeferred(statement, wal, sql, params) : inOne(connection, statement, busyTimeout(), sql, params);
}

/**
 * `sql` (one statement) in a transaction of its own on a WAL database, committed, for a driver's
 * `write`, with the app's busy_timeout untouched: BEGIN (deferred), a read of the inbox's
 * database (`wal.begin()`), the statement, COMMIT. SQLite waits by the
 * busy_timeout only to begin a transaction on a connection that had none, never to make a read
 * transaction a write one (two connections could each wait for the other); in WAL a read waits
 * only while another connection recovers the WAL (once, after a crash), and COMMIT for no lock
 * but the write lock it holds. So the read begins the transaction at once, and the write lock
 * held elsewhere fails the statement SQLITE_BUSY at once (SQLITE_BUSY_SNAPSHOT when another
 * connection committed since the read): rolled back, to be tried again whole, as by `inOne`.
 * Only on WAL: a rollback journal's read waits for a writer's COMMIT, and its COMMIT for the
 * readers, by the busy_timeout (there `inOne`). The mode, asked just before, cannot change in
 * between: only this connection could take the file out of WAL, and it runs nothing else.
 */
export function inDeferred(
  statement: (sql: string) => ReturnType<SyncShape["prepare"]>,
  wal: Wal,
  sql: string,
  params: readonly Param[],
): SqliteRow[] {
  // Outside the try: a BEGIN that fails (a transaction the app left open) has nothing to roll back.
  statement("begin").run();
  try {
    wal.begin();
    const rows = statement(sql).all(...params);
    statement("commit").run();
    return rows;
  } catch (error) {
    try {
      statement("rollback").run();
    } catch {
      // SQLite already rolled back (an I/O error, a full disk): nothing is open.
    }
    throw error;
  }
}

/**
 * A read made at once, without waiting for a lock (on a rollback journal a writer's COMMIT keeps
 * readers out for its moment): undefined when it is locked out, or fails; the transaction's own
 * read then says which, and answers it.
 */
// Stryker disable BlockStatement: undefined is always an allowed answer, the transaction's own read then answers the same
export function readWithoutWaiting(connection: SyncShape, busyTimeout: () => number, read: () => SqliteRow[]) {
  try {
    return withoutWaiting(connection, busyTimeout(), read);
  } catch {
    return undefined;
  }
}
// Stryker restore BlockStatement

/**
 * Runs `step` (BEGIN IMMEDIATE, COMMIT, a read) with the connection's busy_timeout at 0, so a
 * lock held elsewhere fails at once (and is waited for in untilLocked, the event loop free); the
 * app's own busy_timeout (`previous`) is put back at once.
 */
export function withoutWaiting<T>(connection: SyncShape, previous: number, step: () => T): T {
  // Stryker disable next-line ConditionalExpression: with the app's busy_timeout at 0, setting 0 and putting 0 back changes nothing
  if (previous === 0) return step();
  connection.exec("pragma busy_timeout = 0");
  try {
    return step();
  } finally {
    connection.exec(`pragma busy_timeout = ${previous}`);
  }
}
