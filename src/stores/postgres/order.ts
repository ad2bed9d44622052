// The Postgres inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, expiring with the handled ids' retention. Statements of their own beside
// the inbox's, for migrate().
import type { PositionsInTransaction, QueryInTransaction } from "../order/in-transaction.js";

/** The positions table's DDL, for the inbox table `table` (quoted, optionally `"schema"."table"`). */
export function orderSchema(table: string): string[] {
  return [
    `create table if not exists ${positionsTable(table)} (
      scope text not null,
      flag text not null,
      positions text,
      expires_at timestamptz not null,
      primary key (scope, flag)
    )`,
  ];
}

/** Deletes a scope's expired positions. ($1 scope) */
export function prunePositions(table: string): string {
  return `delete from ${positionsTable(table)} where scope = $1 and expires_at < now()`;
}

/**
 * A flag's positions in the handler's transaction. The read is an upsert that locks the flag's
 * row until the transaction ends (a row that does not exist yet is inserted, so there is always
 * one to lock): a second delivery of the flag waits for the first to commit or roll back, then
 * reads what it wrote.
 */
export function positionsIn(
  query: QueryInTransaction,
  table: string,
  scope: string,
  retention: number,
): PositionsInTransaction {
  const t = positionsTable(table);
  return {
    async read(flag) {
      const rows = await query(
        `insert into ${t} (scope, flag, positions, expires_at) values ($1::text, $2::text, null, now())
         on conflict (scope, flag) do update set scope = excluded.scope
         returning case when ${t}.expires_at > now() then ${t}.positions end as positions`,
        [scope, flag],
      );
      const positions = rows[0]?.positions;
      return typeof positions === "string" ? positions : undefined;
    },
    async write(flag, positions) {
      await query(
        `update ${t} set positions = $3::text, expires_at = now() + $4::bigint * interval '1 millisecond'
         where scope = $1::text and flag = $2::text`,
        [scope, flag, positions, retention],
      );
    },
  };
}

/** `"table"` → `"table_positions"`, in the same schema. */
function positionsTable(table: string): string {
  return table.replace(/"$/, '_positions"');
}
