// The Postgres inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, expiring with the handled ids' retention. Statements of their own beside
// the inbox's, for migrate().
import type { WebhookEvent } from "../../events.js";
import {
  type OrderedInTransaction,
  orderInTransaction,
  type PositionsInTransaction,
  staleReply,
} from "../order/in-transaction.js";

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

/** A query in the handler's transaction, as the inbox's drivers run it. */
type Query = (text: string, params: unknown[]) => Promise<readonly Record<string, unknown>[]>;

/**
 * A flag's positions in the handler's transaction. The read is an upsert that locks the flag's
 * row until the transaction ends (a row that does not exist yet is inserted, so there is always
 * one to lock): a second delivery of the flag waits for the first to commit or roll back, then
 * reads what it wrote.
 */
export function positionsIn(query: Query, table: string, scope: string, retention: number): PositionsInTransaction {
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

/** What an ordered delivery in the inbox needs: its positions, the option, and the inbox's 503. */
export interface Ordering {
  positions: PositionsInTransaction;
  handleStale: boolean;
  unavailable: (cause: unknown) => unknown;
}

/** Orders `event` in the handler's transaction, then runs the handler with what is fresh (or answers a stale event). */
export async function runOrdered(
  ordering: Ordering,
  event: WebhookEvent,
  run: (event: WebhookEvent) => unknown,
): Promise<unknown> {
  let ordered: OrderedInTransaction;
  try {
    ordered = await orderInTransaction(event, ordering.positions);
  } catch (error) {
    // The flag's row not locked within lock_timeout, or Postgres failing: the store's failure.
    throw ordering.unavailable(error);
  }
  if (ordered.stale && !ordering.handleStale) return staleReply();
  return run(ordered.event);
}
