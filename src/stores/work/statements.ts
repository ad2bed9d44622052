// The statements of keep-then-work, written once for both inboxes: each database gives its
// dialect (how a parameter is written, its clock's SQL, its row lock), and gets the same
// statements, so the states, "due" and every transition are decided in one place.
import { countsStatement } from "./counts.js";
import { dueCondition, IN_WORK, PARKED } from "./states.js";

/** What differs between Postgres and SQLite in the statements below. */
export interface Dialect {
  /** Parameter `n` (from 1), of a type: `$n::text` on Postgres, `?n` on SQLite. */
  param(n: number, type: "text" | "int"): string;
  /** The `expires_at` of a kept event: never, so neither `prune()` nor a claim takes it. */
  readonly never: string;
  /** The `expires_at`/`handled_at` value of an instant in ms since the epoch (SQL given). */
  at(ms: string): string;
  /** What follows the select of rows to take: `for update skip locked` on Postgres. */
  readonly lock: string;
  /** Columns the lock statement adds (Postgres: the transaction id, to check at COMMIT, and the backend's pid). */
  readonly xid: string;
  /**
   * A FROM item `r` of the rows in the JSON array parameter `n` (objects of {@link ARRIVAL_FIELDS}),
   * each field a column of its name: Postgres's `json_to_recordset`, SQLite's `json_each`.
   */
  rows(n: number): string;
  /**
   * Where an upsert would lock the row it meets, even when its WHERE is false (Postgres's ON
   * CONFLICT DO UPDATE), so that a copy of an event a worker's attempt holds would wait for that
   * attempt, and the deliveries sharing its COMMIT with it: a FROM item that bounds the keep
   * statement's lock waits (`many`: a statement of several events). The keep statement then does
   * nothing on a conflict, and `there` revives an expired row apart. Absent (SQLite: no row
   * locks), one upsert keeps a new row or revives an expired one.
   */
  lockWait?(many: boolean): string;
}

/** The fields of each row in the JSON parameter of `insertMany`, as text but `received_at`, a number. */
export const ARRIVAL_FIELDS = ["id", "body", "type", "created_at", "received_at", "trace"] as const;

/** The columns keep-then-work adds to the inbox table, with their Postgres and SQLite types. */
export const KEEP_COLUMNS: readonly (readonly [name: string, postgres: string, sqlite: string])[] = [
  // The body as received (its UTF-8, decoded losslessly: a verified body is valid UTF-8 JSON).
  ["body", "text", "text"],
  ["type", "text", "text"],
  ["created_at", "text", "text"],
  ["received_at", "bigint", "integer"],
  ["attempts", "integer not null default 0", "integer not null default 0"],
  ["next_at", "bigint", "integer"],
  ["last_error", "text", "text"],
  ["lease_until", "bigint", "integer"],
  // The trace context of the delivery that brought the event (W3C fields as JSON), so that each
  // attempt's span joins that delivery's trace; null without telemetry.
  ["trace_context", "text", "text"],
];

/** The statements of keep-then-work on one table; their parameters are listed in order. */
export interface KeepStatements {
  /** Keeps a new event as pending, due now; its id only when it did. (scope, id, body, type, createdAt, now, trace) */
  readonly insert: string;
  /**
   * Keeps several new events in one statement, so in one COMMIT: the ids of those it kept. Their
   * ids are distinct (a second copy in one statement would meet the first's row). (scope, rows as
   * a JSON array of {@link ARRIVAL_FIELDS})
   */
  readonly insertMany: string;
  /**
   * What a new event's id met: its row's `state`, and `revived` when an expired row (a handled id
   * past its retention) was kept anew as pending by this statement. (as `insert`)
   */
  readonly there: string;
  /** Takes up to `limit` due events (one, with `id`), counting the attempt; parks those with none left. (scope, now, lease, attempts, limit, id) */
  readonly take: string;
  /** In the attempt's transaction: the row, locked, if it is still this attempt's. (scope, id, attempt) */
  readonly lock: string;
  /** In the attempt's transaction: marks it done if it is still this attempt's; a row when it did. (scope, id, now, retention, attempt) */
  readonly done: string;
  /** After a failed attempt: pending again at `next`, or parked when `next` is null. (scope, id, attempt, error, next) */
  readonly fail: string;
  /** The events waiting for an attempt or running one, oldest first. (scope, limit) */
  readonly pending: string;
  /** The parked events, oldest first. (scope, limit) */
  readonly parked: string;
  /** One event, in any state. (scope, id) */
  readonly one: string;
  /** Parked (and pending) events made due now with their attempts anew. (scope, now, id or null, since or null) */
  readonly replay: string;
  /**
   * Deletes the events it names but a handled id within its retention, whose copies it must still
   * answer as duplicates (see {@link purgeable}). (scope, id or null, state or null, before or null, now)
   */
  readonly purge: string;
  /** Drops the body (and last error) of the handled ids within their retention that `purge` leaves. (as `purge`) */
  readonly purgeBody: string;
  /** Counts the kept events by state. (scope) */
  readonly counts: string;
}

const FIELDS = "id, state, type, created_at, received_at, attempts, next_at, last_error, body";

/** The statements for the table `t` (quoted already) in `dialect`. */
export function keepStatements(t: string, d: Dialect): KeepStatements {
  const text = (n: number) => d.param(n, "text");
  const int = (n: number) => d.param(n, "int");
  const spent = `attempts >= ${int(4)}`;
  return {
    insert: keeping(t, d, [text(1), text(2), text(3), text(4), text(5), int(6), text(7)], undefined),
    insertMany: keeping(
      t,
      d,
      [text(1), ...ARRIVAL_FIELDS.map((field) => `r.${field}`)],
      `from ${d.rows(2)}${d.lockWait ? `, ${d.lockWait(true)}` : ""} where true`,
    ),
    there: thereStatement(t, d),
    // A running row whose lease lapsed with no attempt left is parked: its last attempt was counted
    // when it was taken, and never ended (the worker died, or ran past the lease).
    take: `update ${t} set
        state = case when ${spent} then 'parked' else 'running' end,
        last_error = case when ${spent} and state = 'running'
          then 'attempt ' || attempts || ' of ' || attempts || ' ended without a result: the worker stopped, or ran past its lease'
          else last_error end,
        lease_until = case when ${spent} then null else ${int(2)} + ${int(3)} end,
        next_at = case when ${spent} then null else next_at end,
        attempts = case when ${spent} then attempts else attempts + 1 end
      where (scope, id) in (
        select scope, id from ${t}
        where scope = ${text(1)} and ${dueCondition(int(2))} and (${text(6)} is null or id = ${text(6)})
        order by next_at limit ${int(5)}${d.lock}
      )
      returning id, state, attempts, body, trace_context`,
    lock: `select 1 as ours${d.xid} from ${t}
      where scope = ${text(1)} and id = ${text(2)} and state = 'running' and attempts = ${int(3)}${d.lock}`,
    done: `update ${t} set state = 'done', token = null, lease_until = null, next_at = null,
        expires_at = ${d.at(`${int(3)} + ${int(4)}`)}, handled_at = ${d.at(int(3))}
      where scope = ${text(1)} and id = ${text(2)} and state = 'running' and attempts = ${int(5)}
      returning 1 as done`,
    fail: `update ${t} set state = case when ${int(5)} is null then 'parked' else 'pending' end,
        next_at = ${int(5)}, last_error = ${text(4)}, lease_until = null
      where scope = ${text(1)} and id = ${text(2)} and state = 'running' and attempts = ${int(3)}
      returning 1 as marked`,
    // Each with its index's condition as written (not its states as parameters), to read by it.
    pending: `select ${FIELDS} from ${t} where scope = ${text(1)} and ${IN_WORK} order by received_at, id limit ${int(2)}`,
    parked: `select ${FIELDS} from ${t} where scope = ${text(1)} and ${PARKED} order by received_at, id limit ${int(2)}`,
    one: `select ${FIELDS} from ${t} where scope = ${text(1)} and id = ${text(2)}`,
    replay: `update ${t} set state = 'pending', attempts = 0, next_at = ${int(2)}, lease_until = null, expires_at = ${d.never}
      where scope = ${text(1)} and ((${IN_WORK} and state = 'pending') or ${PARKED})
        and (${text(3)} is null or id = ${text(3)}) and (${int(4)} is null or received_at >= ${int(4)})
      returning id`,
    purge: `delete from ${t} where ${purgeable(d, false)} returning id`,
    purgeBody: `update ${t} set body = null, last_error = null
      where ${purgeable(d, true)} and (body is not null or last_error is not null)
      returning id`,
    counts: countsStatement(t, d),
  };
}

/**
 * The rows a purge names (parameters as {@link KeepStatements.purge}) that it deletes (`held`
 * false), or whose data alone it drops (`held` true): a done row within its retention keeps its id
 * as done, so that a copy arriving before `prune()` removes it (past the retention, as a copy's
 * `maxAge` allows) is still a duplicate and its effects do not happen twice. Any other row named
 * is deleted: a kept event not yet done, or a handled id past its retention.
 */
function purgeable(d: Dialect, held: boolean): string {
  const text = (n: number) => d.param(n, "text");
  const int = (n: number) => d.param(n, "int");
  return `scope = ${text(1)} and (${text(2)} is null or id = ${text(2)})
        and (${text(3)} is null or state = ${text(3)}) and (${int(4)} is null or received_at < ${int(4)})
        and ${held ? "" : "not "}(state = 'done' and expires_at > ${d.at(int(5))})`;
}

/**
 * The one statement that keeps events, given the SQL of its values (scope, id, body, type,
 * createdAt, received time, trace) and where they come from: parameters (no `from`: one row), or
 * the rows of a FROM item (`where true` after it, which SQLite needs to read the ON CONFLICT that
 * follows a SELECT). A row is new, or (without `lockWait`) revives an expired one (a handled id
 * past its retention); any other is left as it is, and its id is not returned.
 */
function keeping(t: string, d: Dialect, values: string[], from: string | undefined): string {
  const [scope, id, body, type, createdAt, now, trace] = values;
  const row = `${scope}, ${id}, 'pending', null, ${d.never}, ${d.at(now as string)}, ${body}, ${type}, ${createdAt},
        ${now}, 0, ${now}, null, null, ${trace}`;
  const source =
    from !== undefined
      ? `select ${row} ${from}`
      : d.lockWait
        ? `select ${row} from ${d.lockWait(false)}`
        : `values (${row})`;
  return `insert into ${t} (scope, id, state, token, expires_at, handled_at, body, type, created_at, received_at,
        attempts, next_at, last_error, lease_until, trace_context)
      ${source}
      ${
        d.lockWait
          ? "on conflict (scope, id) do nothing"
          : `on conflict (scope, id) do update set ${revival("excluded.")}
      where ${t}.expires_at <= excluded.handled_at`
      }
      returning id`;
}

/** The SET list that makes a row pending anew, from the new values: `excluded.` columns, or SQL per column. */
function revival(from: string | Record<string, string>): string {
  const v = (column: string) => (typeof from === "string" ? `${from}${column}` : (from[column] as string));
  return `state = 'pending', token = null, expires_at = ${v("expires_at")},
        handled_at = ${v("handled_at")}, body = ${v("body")}, type = ${v("type")}, created_at = ${v("created_at")},
        received_at = ${v("received_at")}, attempts = 0, next_at = ${v("next_at")}, last_error = null,
        lease_until = null, trace_context = ${v("trace_context")}`;
}

/**
 * What a new event's id met (see {@link KeepStatements.there}). Without `lockWait` the keep
 * statement revived an expired row already: a read. With it, the expired row is revived here, in
 * the same statement, so a copy still costs one statement more; a row that is not expired is
 * neither updated nor locked, and a running event's row lock is not waited for.
 */
function thereStatement(t: string, d: Dialect): string {
  const text = (n: number) => d.param(n, "text");
  const int = (n: number) => d.param(n, "int");
  const found = `from ${t} where scope = ${text(1)} and id = ${text(2)}`;
  if (!d.lockWait) return `select state, 0 as revived ${found}`;
  const now = int(6);
  const values = {
    expires_at: d.never,
    handled_at: d.at(now),
    body: text(3),
    type: text(4),
    created_at: text(5),
    received_at: now,
    next_at: now,
    trace_context: text(7),
  };
  return `with revived as (
      update ${t} set ${revival(values)}
      from ${d.lockWait(false)}
      where scope = ${text(1)} and id = ${text(2)} and expires_at <= ${d.at(now)}
      returning 1
    )
    select state, exists (select 1 from revived) as revived ${found}`;
}
