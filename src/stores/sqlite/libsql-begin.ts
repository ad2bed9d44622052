// How the inbox begins a write transaction on a libSQL client. A local file's statement that
// fails with SQLITE_BUSY at BEGIN IMMEDIATE (another process holds the write lock past the
// inbox's wait) is left by SQLite ready to be tried again, and so still running, until it is reset
// or finalized; libSQL's client neither resets nor finalizes a statement that failed, so it stays
// running on its connection until the garbage collector frees it. Meanwhile that connection, which
// the client's pool hands to the next transaction, refuses the inbox's savepoint ("cannot open
// savepoint - SQL statements in progress") and leaves a lone write of the app uncommitted: every
// delivery after one refused while the file was locked would be refused too. `transaction("write")`
// runs its BEGIN IMMEDIATE as such a statement; `executeMultiple` finalizes each of its statements,
// failed or not.
import type { SqliteAsyncClient, SqliteAsyncTransaction } from "./types.js";

/** A libSQL transaction that runs SQL text through `executeMultiple`, as `@libsql/client`'s does. */
export interface MultipleTransaction extends SqliteAsyncTransaction {
  executeMultiple(sql: string): Promise<void>;
}

/**
 * A transaction of `client` holding the write lock. On a local file (`local`): a deferred
 * transaction (its BEGIN takes no lock, so it cannot fail with SQLITE_BUSY), then, through
 * `executeMultiple`, its end and BEGIN IMMEDIATE on the connection it holds; a BEGIN IMMEDIATE that
 * fails closes the transaction, giving back a connection with nothing left running. Elsewhere (a
 * libSQL server, whose BEGIN runs on the server), `transaction("write")`.
 */
export async function beginWrite(client: SqliteAsyncClient, local: boolean): Promise<SqliteAsyncTransaction> {
  if (!local) return client.transaction("write");
  const tx = (await client.transaction("deferred" as "write")) as MultipleTransaction;
  try {
    await tx.executeMultiple("rollback; begin immediate");
  } catch (error) {
    tx.close();
    throw error;
  }
  return tx;
}
