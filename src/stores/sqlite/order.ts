// The SQLite inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, expiring with the handled ids' retention. A list of statements of its own
// beside the inbox's, for migrate(); and the positions read and written in a handler's transaction.
import type { WebhookEvent } from "../../events.js";
import { type OrderedInTransaction, orderInTransaction } from "../order/in-transaction.js";
import type { OpenTransaction } from "./drivers.js";

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

/** Orders `event` in the open transaction `open`: its flag's positions read and written there. */
export function orderedInSqlite(
  open: OpenTransaction,
  sql: OrderStatements,
  scope: string,
  retention: number,
  event: WebhookEvent,
): Promise<OrderedInTransaction> {
  return orderInTransaction(event, {
    read: async (flag) => {
      const rows = await open.query(sql.read, [scope, flag, Date.now()]);
      return rows[0] === undefined ? undefined : String(rows[0].positions);
    },
    write: async (flag, positions) =>
      void (await open.run(sql.write, [scope, flag, positions, Date.now() + retention])),
  });
}

/** With `order`: the positions table's statements, and whether a wholly stale event still runs the handler. */
export interface OrderOption {
  sql: OrderStatements;
  handleStale: boolean;
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
): OrderOption | undefined {
  if (!order) return undefined;
  if (!interactive) {
    throw new TypeError('flag-webhooks: option "order" of SqliteInbox needs a database with interactive transactions');
  }
  return { sql: orderStatementsFor(table), handleStale: typeof order === "object" && order.handleStale === true };
}
