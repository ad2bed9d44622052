// The SQLite inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, expiring with the handled ids' retention. A list of statements of its own
// beside the inbox's, for migrate(); and the positions read and written in a handler's transaction.
import type { PositionsInTransaction, QueryInTransaction, TransactionOrder } from "../order/in-transaction.js";
import type { OpenTransaction } from "./drivers.js";
import { positional } from "./keep.js";

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
    // Numbered parameters, as keep-then-work's statements are: the worker's transaction takes those.
    read: `select positions from ${t} where scope = ?1 and flag = ?2 and expires_at > ?3`,
    write: `insert into ${t} (scope, flag, positions, expires_at) values (?1, ?2, ?3, ?4)
      on conflict (scope, flag) do update set positions = excluded.positions, expires_at = excluded.expires_at
      returning flag`,
    prune: `delete from ${t} where scope = ? and expires_at < ?`,
  };
}

/**
 * A flag's positions read and written by `query` in the transaction the handler writes in (the
 * inbox's for handle(), the worker's for an attempt): the write lock held until it ends, so two
 * deliveries of a flag never decide on the same positions.
 */
function positionsIn(
  query: QueryInTransaction,
  sql: OrderStatements,
  scope: string,
  retention: number,
): PositionsInTransaction {
  return {
    read: async (flag) => {
      const rows = await query(sql.read, [scope, flag, Date.now()]);
      return rows[0] === undefined ? undefined : String(rows[0].positions);
    },
    write: async (flag, positions) => void (await query(sql.write, [scope, flag, positions, Date.now() + retention])),
  };
}

/** A statement in `open`, handle()'s transaction, with the numbered parameters the order's statements use. */
export function numbered(open: OpenTransaction): QueryInTransaction {
  return (sql, params) => {
    const statement = positional(sql, params);
    return open.query(statement.sql, statement.params);
  };
}

/** With `order`: the positions table's statements, and the order as handle() and the worker apply it. */
export interface OrderOption extends TransactionOrder {
  sql: OrderStatements;
}

/**
 * The inbox's `order` option, checked: the positions table's statements beside `table` and whether
 * a wholly stale event still runs the handler; a TypeError on a database without interactive
 * transactions (D1, a Durable Object's storage), which cannot read and write positions in one.
 */
export function orderOption(
  order: boolean | { handleStale?: boolean } | undefined,
  table: string,
  interactive: boolean,
  scope: string,
  retention: number,
): OrderOption | undefined {
  if (!order) return undefined;
  if (!interactive) {
    throw new TypeError('flag-webhooks: option "order" of SqliteInbox needs a database with interactive transactions');
  }
  const sql = orderStatementsFor(table);
  return {
    sql,
    handleStale: typeof order === "object" && order.handleStale === true,
    retention,
    positions: (query) => positionsIn(query, sql, scope, retention),
  };
}
