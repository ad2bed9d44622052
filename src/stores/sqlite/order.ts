// The SQLite inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, expiring with the handled ids' retention. A list of statements of its own
// beside the inbox's, for migrate().

/** The statements of the positions table beside the inbox table `table` (already checked). */
export interface OrderStatements {
  readonly create: readonly string[];
  /** The positions of a flag, unexpired. (scope, flag, now) */
  readonly read: string;
  /** Writes a flag's positions. (scope, flag, positions, expires) */
  readonly write: string;
  /** Deletes expired rows of a scope. (scope, now) */
  readonly prune: string;
}

/** The positions table's statements, for the inbox table `table`, a checked name (`schema.table` or `table`). */
export function orderStatementsFor(table: string): OrderStatements {
  const parts = table.split(".");
  const name = `${parts.pop() as string}_positions`;
  const t = `${parts.length ? `"${parts[0]}".` : ""}"${name}"`;
  return {
    create: [
      `create table if not exists ${t} (
        scope text not null,
        flag text not null,
        positions text not null,
        expires_at integer not null,
        primary key (scope, flag)
      ) without rowid`,
    ],
    read: `select positions from ${t} where scope = ? and flag = ? and expires_at > ?`,
    write: `insert into ${t} (scope, flag, positions, expires_at) values (?, ?, ?, ?)
      on conflict (scope, flag) do update set positions = excluded.positions, expires_at = excluded.expires_at`,
    prune: `delete from ${t} where scope = ? and expires_at < ?`,
  };
}
