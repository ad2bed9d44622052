// Keep-then-work on Postgres: its dialect of the shared statements (src/stores/work/), the
// database as keep-then-work uses it (a pg or postgres.js driver), and what migrate() adds to an
// existing table. Several workers in several processes: a worker takes due rows with FOR UPDATE
// SKIP LOCKED, and runs each in a transaction that holds the row's lock, so that while one runs
// an event, no other can take it, even past its lease.
import type { HeldTransaction, KeepDatabase, KeepParam } from "../work/database.js";
import { ARRIVAL_FIELDS, type Dialect, KEEP_COLUMNS } from "../work/statements.js";
import { IN_WORK, parkedIndex, STATES, stateList } from "../work/states.js";
import { type Driver, sameTransaction } from "./drivers.js";
import type { PositionsRows } from "./order.js";

/**
 * The longest a keep statement of several events waits for a row another transaction holds: a
 * copy whose COMMIT is in flight (another receiver's, an attempt's last statement) ends sooner.
 * Past it, the statement fails, and its events are kept again one by one (see GroupCommit), each
 * waiting up to the inbox's `lockTimeout`, so that one event held by a long transaction (a copy
 * that `handle()` runs) costs the others of its COMMIT only this wait.
 */
const GROUP_LOCK_WAIT = 50;

/**
 * Postgres's dialect: typed parameters, timestamps from the clock's ms, the row lock, and the keep
 * statement's lock waits bounded: one event's by `lockTimeout` (ms; then 409, as for `handle()`'s
 * copy in flight), several's by {@link GROUP_LOCK_WAIT} at most.
 */
export function postgresDialect(lockTimeout: number): Dialect {
  return {
    param: (n, type) => `$${n}::${type === "text" ? "text" : "bigint"}`,
    never: "'infinity'::timestamptz",
    at: (ms) => `to_timestamp((${ms})::float8 / 1000)`,
    lock: " for update skip locked",
    xid: ", txid_current()::text as xid, pg_backend_pid() as pid",
    rows: (n) =>
      `json_to_recordset($${n}::text::json) as r(${ARRIVAL_FIELDS.map((f) => `${f} ${f === "received_at" ? "bigint" : "text"}`).join(", ")})`,
    // Set for the statement's own implicit transaction only; a whole number of ms (0 would mean no bound).
    lockWait: (many) =>
      `(select set_config('lock_timeout', '${Math.max(1, Math.ceil(many ? Math.min(lockTimeout, GROUP_LOCK_WAIT) : lockTimeout))}', true)) as waits`,
  };
}

/** The check constraint keep-then-work puts on `state`, in place of `handle()`'s. */
const STATE_CHECK = "flag_webhooks_inbox_states";

/**
 * What migrate() runs after it creates the table, in its transaction: the columns, the state
 * check widened to the kept states, the index the worker finds due events by, and the one of parked
 * events (which the counts and `parked()` read). Each is
 * idempotent. The old check (claimed, done) is dropped and the wider one added NOT VALID: every
 * existing row satisfies it (its states are among the new ones), so the table is not scanned
 * under its lock; new rows are checked.
 */
export function keepSchema(table: string, dueIndex: string, parkedName: string): string[] {
  const literal = `'${table}'`;
  return [
    `alter table ${table} ${KEEP_COLUMNS.map(([name, type]) => `add column if not exists ${name} ${type}`).join(", ")}`,
    `do $$
     declare c record;
     begin
       for c in select conname from pg_constraint where conrelid = ${literal}::regclass and contype = 'c'
         and pg_get_constraintdef(oid) like '%''claimed''%' and pg_get_constraintdef(oid) not like '%''parked''%'
       loop
         execute format('alter table %s drop constraint %I', ${literal}, c.conname);
       end loop;
       if not exists (select 1 from pg_constraint where conrelid = ${literal}::regclass and conname = '${STATE_CHECK}') then
         alter table ${table} add constraint ${STATE_CHECK} check (state in ${stateList(STATES)}) not valid;
       end if;
     end $$`,
    `create index if not exists ${dueIndex} on ${table} (scope, next_at) where ${IN_WORK}`,
    parkedIndex(table, parkedName),
  ];
}

/**
 * Cancels the statement the server runs in transaction `xid` on backend `pid`, if it still does.
 * Giving up a connection does not stop its backend while a statement runs (Postgres reads the
 * socket only between statements): a handler stuck past its deadline in a statement that waits
 * would keep the transaction, and the row's lock with it, as long as it waits, and the failure's
 * mark would wait behind it. Cancelled, the statement fails, and the transaction rolls back: its
 * backend ends (pg: its socket was closed) or runs the ROLLBACK queued behind it (postgres.js).
 * Cancelled rather than ended, so the client's connection is not cut under it (postgres.js's
 * `sql.end()` then never resolves). The transaction's id (mod 2^32, as pg_stat_activity shows
 * it) makes sure no other session of a reused pid is ever touched.
 */
async function cancelStatement(driver: Driver, pid: unknown, xid: unknown): Promise<void> {
  if (typeof pid !== "number" || typeof xid !== "string" || !/^\d+$/.test(xid)) return;
  try {
    await driver.query(
      `select pg_cancel_backend(pid) from pg_stat_activity
       where pid = $1::int and backend_xid::text = ($2::bigint % 4294967296)::text`,
      [pid, xid],
    );
  } catch {
    // Not allowed, or the database is gone: the failure's mark then waits for the statement.
  }
}

/**
 * A driver as keep-then-work uses it. With `positions` (the inbox's `order`), an attempt at an
 * ordered event reads its flag's positions, the row locked, in the statement that locks the
 * event's row, and writes them in the check before COMMIT: no round trip of their own.
 */
export function postgresKeep(driver: Driver, positions?: PositionsRows): KeepDatabase {
  return {
    capacity: driver.transactions,
    query: (sql, params) => driver.query(sql, params),
    // lock_not_available: the keep statement's lock wait ran out (see postgresDialect).
    held: (error) => (error as { code?: unknown } | null)?.code === "55P03",
    async begin(sql, params, flag): Promise<HeldTransaction> {
      const folding = flag === undefined ? undefined : positions;
      const text = folding
        ? `with locked as (${sql}), ${folding.cte("locked", `$${params.length + 1}::text`)}
           select locked.*, (select positions from flag_row) as positions from locked`
        : sql;
      const { transaction, rows } = await driver.begin(
        { text, params: [...params, ...(folding ? [flag] : [])] as (string | number)[] },
        new AbortController().signal,
      );
      const folded = folding && flag !== undefined ? folding.folded(flag, rows) : undefined;
      return {
        tx: transaction.tx,
        rows,
        ...(folded && { positions: folded }),
        query: (text, values: readonly KeepParam[]) => transaction.query(text, values),
        // COMMIT only if this is still the transaction that locked the row and it is not aborted:
        // a handler that ended it through `tx` must not have its writes taken for done.
        commit: () => transaction.commit(sameTransaction(rows[0]?.xid, "worker", folded?.statement)),
        rollback: () => transaction.rollback(),
        async abandon() {
          transaction.abort();
          await cancelStatement(driver, rows[0]?.pid, rows[0]?.xid);
        },
      };
    },
  };
}
