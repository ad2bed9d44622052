// The app's busy_timeout on a connection the inbox borrows. The inbox bounds its own waits for
// the write lock by its `timeout`; the app's statements on the same connection wait by the app's
// own busy_timeout, before and after the inbox's, so whatever the inbox sets for its wait is put
// back.
import type { SqliteRow } from "./types.js";

/** The busy_timeout in the row `pragma busy_timeout` gave, as each driver names its column. */
export function busyTimeoutOf(current: SqliteRow | undefined): number {
  return Math.max(0, Math.floor(Number(current?.timeout ?? Object.values(current ?? {})[0] ?? 0)));
}
