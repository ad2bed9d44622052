// The Postgres inbox's table of ordered positions (its `order` option): one row per flag, its
// positions as JSON, kept with the handled ids' retention. Statements of their own beside
// the inbox's, for migrate().
//
// A row is read whether its retention has run out or not, and prune() deletes expired rows only
// while the scope keeps no event (pending, running or parked): a kept event may run, or be
// replayed, long after it came, past any retention, and judged against no positions it would undo
// a newer change that succeeded meanwhile. An expired row read by handle() changes nothing: its
// positions are older than anything `maxAge` lets in. Rows stay bounded by the flags, since the
// rule forgets positions older than the retention before a flag's newest.
import type { PositionsInTransaction } from "../order/in-transaction.js";
import { KEPT, stateList } from "../work/states.js";
import type { Statement } from "./drivers.js";

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

/** Deletes a scope's expired positions, unless it keeps events (see the head of this file). ($1 scope) */
export function prunePositions(table: string): string {
  return `delete from ${positionsTable(table)} where scope = $1 and expires_at < now()
    and not exists (select 1 from ${table} where scope = $1 and state in ${stateList(KEPT)})`;
}

/**
 * The flag's row, locked, and its unexpired positions, as a common table expression `flag_row`
 * (one column, `positions`) for each row of `from`: an upsert, so there is always a row to lock
 * (one that does not exist yet is inserted). A second delivery of the flag waits for the first to
 * commit or roll back, then reads what it wrote: whatever the statement's snapshot, ON CONFLICT DO
 * UPDATE locks and updates the latest committed version of the row, and RETURNING gives that
 * version's positions. So the read may share a statement with the claim of the event id, whose
 * snapshot was taken before the wait. (`scope` and `flag` are SQL: parameters.)
 */
function flagRow(t: string, scope: string, flag: string, from: string): string {
  return `flag_row as (
    insert into ${t} (scope, flag, positions, expires_at) select ${scope}, ${flag}, null, now() from ${from}
    on conflict (scope, flag) do update set scope = excluded.scope
    returning ${t}.positions -- whether expired or not: see the head of this file
  )`;
}

/** The write of a flag's positions, renewing their retention. */
function writeOf(t: string, scope: string, flag: string, positions: string, retention: number): Statement {
  return {
    text: `update ${t} set positions = $3::text, expires_at = now() + $4::bigint * interval '1 millisecond'
       where scope = $1::text and flag = $2::text`,
    params: [scope, flag, positions, retention],
  };
}

/** The positions table of an inbox's scope, as its handle() and its worker read and write it. */
export interface PositionsRows {
  /**
   * The common table expression `flag_row` that locks the flag's row and reads its positions
   * (one column, `positions`) for each row of `from`, an earlier expression of the statement;
   * `flag` is the SQL of the flag key's parameter, the scope is `$1`.
   */
  cte(from: string, flag: string): string;
  /** Positions read by a statement with {@link cte} (its rows), to be written with the COMMIT. */
  folded(flag: string, rows: readonly Record<string, unknown>[]): FoldedPositions;
}

/** The positions of `table`'s ordered flags in `scope`, kept for `retention` ms after each write. */
export function positionsRows(table: string, scope: string, retention: number): PositionsRows {
  const t = positionsTable(table);
  return {
    cte: (from, flag) => flagRow(t, "$1::text", flag, from),
    folded: (flag, rows) =>
      new FoldedPositions(flag, rows[0]?.positions, (positions) => writeOf(t, scope, flag, positions, retention)),
  };
}

/**
 * A flag's positions that a transaction read with its first statement, and writes with its
 * COMMIT: no statement of their own, so `order` adds no round trip. The write is run by the check
 * before COMMIT, after it made sure the transaction is still the one that read them.
 */
export class FoldedPositions implements PositionsInTransaction {
  #next: string | undefined;
  readonly #text: string | undefined;

  constructor(
    private readonly flag: string,
    read: unknown,
    private readonly writeStatement: (positions: string) => Statement,
  ) {
    this.#text = typeof read === "string" ? read : undefined;
  }

  async read(flag: string): Promise<string | undefined> {
    if (flag !== this.flag) throw new Error(`flag-webhooks: the positions read were those of another flag`);
    return this.#text;
  }

  async write(flag: string, positions: string): Promise<void> {
    if (flag !== this.flag) throw new Error(`flag-webhooks: the positions read were those of another flag`);
    this.#next = positions;
  }

  /** The write to run with the COMMIT, if the rule gave new positions. */
  get statement(): Statement | undefined {
    return this.#next === undefined ? undefined : this.writeStatement(this.#next);
  }
}

/** `"table"` → `"table_positions"`, in the same schema. */
function positionsTable(table: string): string {
  return table.replace(/"$/, '_positions"');
}
