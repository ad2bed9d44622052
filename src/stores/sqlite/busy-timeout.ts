// The app's busy_timeout on a connection the inbox borrows. The inbox bounds its own waits for
// the write lock by its `timeout`; the app's statements on the same connection wait by the app's
// own busy_timeout, before and after the inbox's, so whatever the inbox sets for its wait is put
// back.
import type { SqliteRow } from "./types.js";

/** Runs one statement: a libSQL client, or a transaction of one. */
interface Executes {
  execute(statement: { sql: string; args: never[] }): Promise<{ rows: ArrayLike<unknown> }>;
}

/** The busy_timeout in the row `pragma busy_timeout` gave, as each driver names its column. */
export function busyTimeoutOf(current: SqliteRow | undefined): number {
  return Math.max(0, Math.floor(Number(current?.timeout ?? Object.values(current ?? {})[0] ?? 0)));
}

/** The busy_timeout of the connection `on` runs its next statement on. */
export async function readBusyTimeout(on: Executes): Promise<number> {
  const { rows } = await on.execute({ sql: "pragma busy_timeout", args: [] });
  return busyTimeoutOf(rows[0] as SqliteRow | undefined);
}

/** Sets the busy_timeout of the connection `on` runs its next statement on. */
export async function setBusyTimeout(on: Executes, ms: number): Promise<void> {
  await on.execute({ sql: `pragma busy_timeout = ${Math.max(0, Math.floor(ms))}`, args: [] });
}

/** The inbox's wait for the lock on one transaction's connection of a libSQL client, and the app's value put back. */
export interface LockWait {
  /**
   * Sets the busy_timeout to 0 on the connection the client's next transaction takes, having read
   * the app's own value first (once per transaction: a try after a failed one finds it put back).
   */
  beforeBegin(): Promise<void>;
  /**
   * Puts the app's value back: on `on` (a transaction that began too late, still open), or, while
   * the inbox's wait is set, through the client, whose next call takes the connection the
   * transaction (or a failed BEGIN) gave back to its pool. Never rejects.
   */
  putBack(on?: Executes): Promise<void>;
}

/**
 * The busy_timeout of a local libSQL file's connection while the inbox holds it (0: the inbox
 * waits for the lock itself, between tries, with the event loop free), and the app's own value
 * put back; nothing on a remote client.
 */
export function lockWait(client: Executes, local: boolean): LockWait {
  let previous: number | undefined;
  let waiting = false;
  return {
    async beforeBegin() {
      if (!local) return;
      // Read once: were a put-back to have failed, a second read would take the inbox's 0 for the app's.
      previous ??= await readBusyTimeout(client);
      waiting = true;
      await setBusyTimeout(client, 0);
    },
    async putBack(on) {
      if (previous === undefined || !(on || waiting)) return;
      try {
        await setBusyTimeout(on ?? client, previous);
        waiting = false;
      } catch {
        // The transaction is gone: put back through the client once it is.
      }
    },
  };
}
