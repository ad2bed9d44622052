// How the inbox takes the write lock on a libSQL client, and ends the transaction that holds it.
//
// libSQL runs a local file's statements synchronously under its promises, so a wait inside SQLite
// (its busy_timeout) would stop this process with it: the lock another process holds is tried for
// with SQLite's wait at 0, and tried again after pauses by the driver. The wait is set on the
// transaction's own connection, never through the client: `@libsql/client` lends the connections
// of a pool, and an app's statement borrowing between a pragma run through the client and the
// inbox's transaction would take the connection set to 0 (and fail SQLITE_BUSY at once where its
// own busy_timeout would wait), while the transaction took another. The app's value is read on the
// same connection and put back before the connection goes back to the pool, whether the lock was
// taken or not.
//
// The lock is taken by a write that changes nothing, inside a deferred transaction: a statement
// that fails with SQLITE_BUSY leaves the transaction open, so the app's value can still be put
// back on its connection (a BEGIN IMMEDIATE that failed would have closed it, and libSQL refuses
// any statement of a closed transaction). Every such statement runs through `executeMultiple`,
// which finalizes its statements, failed or not: a statement run the other way and failed busy is
// left running on its connection until the garbage collector frees it, and that connection then
// refuses the next transaction's savepoint ("SQL statements in progress").
import { busyTimeoutOf } from "./busy-timeout.js";
import { inboxSchema } from "./schema.js";
import type { SqliteAsyncClient, SqliteAsyncTransaction, SqliteRow } from "./types.js";

/** A libSQL transaction that runs SQL text through `executeMultiple`, as `@libsql/client`'s does. */
interface MultipleTransaction extends SqliteAsyncTransaction {
  executeMultiple(sql: string): Promise<void>;
}

/**
 * The write that takes the lock of the file holding the inbox's `table` and changes nothing: no
 * row matches, so no trigger fires and no page is written.
 */
export function lockProbe(table: string): string {
  return `update ${inboxSchema(table).table} set id = id where 0`;
}

/** A transaction holding the write lock, and how it ends with the app's busy_timeout put back. */
export interface WriteTransaction {
  readonly tx: SqliteAsyncTransaction;
  /**
   * One try of COMMIT, without SQLite's wait (on a rollback journal COMMIT waits for the file's
   * readers); one that failed busy leaves the transaction open, to be tried again or rolled back.
   */
  commit(): Promise<void>;
  /** ROLLBACK, and the connection given back to the client. Never rejects. */
  rollback(): Promise<void>;
}

/**
 * A transaction of `client` holding the write lock, or SQLITE_BUSY at once when another
 * connection holds it. On a local file (`local`), `probe` is a write that changes nothing (an
 * UPDATE of the inbox's table `where 0`); until the table exists (the first `migrate()`), the
 * file's user_version written with its own value. Elsewhere (a libSQL server, whose BEGIN runs and
 * waits on the server), `transaction("write")`.
 */
export async function beginWrite(client: SqliteAsyncClient, local: boolean, probe: string): Promise<WriteTransaction> {
  // Stryker disable next-line ConditionalExpression,BlockStatement: a libSQL server's path (sqld), which no test starts: unmeasured, not equivalent
  if (!local) {
    // Stryker disable next-line StringLiteral: a libSQL server's path (sqld), which no test starts: unmeasured, not equivalent
    const tx = await client.transaction("write");
    // Stryker disable next-line ObjectLiteral,ArrowFunction: a libSQL server's path (sqld), which no test starts: unmeasured, not equivalent
    return { tx, commit: () => tx.commit(), rollback: () => tx.rollback().catch(() => {}) };
  }
  // A deferred BEGIN takes no lock, so it cannot wait or fail busy.
  const tx = (await client.transaction("deferred" as "write")) as MultipleTransaction;
  let app: number | undefined;
  const rollback = async () => {
    try {
      // Stryker disable next-line ConditionalExpression,StringLiteral: app is undefined only when its read failed, before any pragma was set, and tx.close() rolls back what is open
      await tx.executeMultiple(`${app === undefined ? "" : `pragma busy_timeout = ${app}; `}rollback`);
    } catch {
      // Ended already (by SQLite, or by the handler through tx): nothing is left to roll back,
      // and the app's value was put back once the lock was taken.
    } finally {
      tx.close();
    }
  };
  try {
    app = busyTimeoutOf((await tx.execute({ sql: "pragma busy_timeout", args: [] })).rows[0] as SqliteRow);
    await takeLock(tx, probe, app);
  } catch (error) {
    await rollback();
    throw error;
  }
  return {
    tx,
    // The app's value is back in the same call once COMMIT succeeds; a COMMIT that failed left the
    // transaction open, and `rollback` puts it back.
    commit: () => tx.executeMultiple(`pragma busy_timeout = 0; commit; pragma busy_timeout = ${app}`),
    rollback,
  };
}

/** The write lock, without SQLite's wait; the app's busy_timeout back once it is held. */
async function takeLock(tx: MultipleTransaction, probe: string, app: number): Promise<void> {
  try {
    await tx.executeMultiple(`pragma busy_timeout = 0; ${probe}; pragma busy_timeout = ${app}`);
  } catch (error) {
    // Stryker disable next-line ConditionalExpression: any other failure of the probe (busy, read-only, I/O) fails the user_version write, busy_timeout at 0, the same way
    if (!/no such table/i.test(String((error as Error).message))) throw error;
    // Before the inbox's table exists (the first migrate()): the file's user_version written
    // with the value it has, a write that leaves every row as it was.
    // Stryker disable next-line ArrayDeclaration: libSQL binds no argument to a statement with no parameter
    const { rows } = await tx.execute({ sql: "pragma user_version", args: [] });
    const version = Number(Object.values((rows[0] ?? {}) as SqliteRow)[0] ?? 0);
    await tx.executeMultiple(`pragma busy_timeout = 0; pragma user_version = ${version}; pragma busy_timeout = ${app}`);
  }
}
