// The SQLite inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, kept with the handled ids' retention. A list of statements of its own
// beside the inbox's, for migrate(); and the positions read and written in a handler's transaction.
//
// A row is read whether its retention has run out or not, and prune() deletes expired rows only
// while the scope keeps no event (pending, running or parked): a kept event may run, or be
// replayed, long after it came, past any retention, and judged against no positions it would undo
// a newer change that succeeded meanwhile. An expired row read by handle() changes nothing: its
// positions are older than anything `maxAge` lets in. Rows stay bounded by the flags, since the
// rule forgets positions older than the retention before a flag's newest.
import type { PositionsInTransaction, QueryInTransaction, TransactionOrder } from "../order/in-transaction.js";
import { KEPT, stateList } from "../work/states.js";
import type { OpenTransaction } from "./drivers.js";
import { positional } from "./keep.js";

/** The statements of the positions table beside the inbox table `table` (already checked). */
export interface OrderStatements {
  readonly create: readonly string[];
  /** The positions of a flag. (scope, flag) */
  readonly read: string;
  /** Writes a flag's positions. (scope, flag, positions, expires) */
  readonly write: string;
  /** Deletes expired rows of a scope that keeps no event. (scope, now, scope) */
  readonly prune: string;
}

/** The positions table's statements, for the inbox table `table`, a checked name (`schema.table` or `table`). */
export function orderStatementsFor(table: string): OrderStatements {
  const parts = table.split(".");
  const inboxName = parts.pop() as string;
  const schema = parts.length ? `"${parts[0]}".` : "";
  const t = `${schema}"${inboxName}_positions"`;
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
    // Read whether expired or not: see the head of this file.
    read: `select positions from ${t} where scope = ?1 and flag = ?2`,
    write: `insert into ${t} (scope, flag, positions, expires_at) values (?1, ?2, ?3, ?4)
      on conflict (scope, flag) do update set positions = excluded.positions, expires_at = excluded.expires_at
      returning flag`,
    prune: `delete from ${t} where scope = ? and expires_at < ?
      and not exists (select 1 from ${schema}"${inboxName}" where scope = ? and state in ${stateList(KEPT)})`,
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
      const rows = await query(sql.read, [scope, flag]);
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
