// The one statement that opens handle()'s transaction: it claims an event id (or finds it done or
// in flight) and, for an ordered event, locks its flag's row and reads its positions, so an
// ordered delivery costs no round trip more than an unordered one.
import type { PositionsRows } from "./order.js";

/**
 * The claim statement on the inbox table `table` (quoted). Parameters: $1 scope, $2 stored id,
 * $3 retention in ms, $4 lock_timeout, $5 statement_timeout, and $6 the flag's key when
 * `ordered` is given. Rows: `xid` when claimed (with `positions` when ordered), else the `state`
 * of the unexpired row found.
 */
export function claimStatement(table: string, ordered: PositionsRows | undefined): string {
  // An id committed and unexpired in this statement's snapshot is answered from that read, and
  // the insert is not tried: trying it would lock the row (ON CONFLICT DO UPDATE locks it even
  // when its WHERE is false), and copies of a handled id, replayed at speed, would each wait for
  // the one before. An id in flight is not in the snapshot: the insert waits for its transaction,
  // up to lock_timeout, as it must.
  //
  // lock_timeout bounds only the inbox's own waits (the claim, the flag's row): once they are
  // over, the last column sets it back to the session's value, read before it was set, so the
  // handler's statements wait for a lock as they would outside the inbox, bounded by
  // statement_timeout (`timeout`) alone.
  return `with settings as (
     select current_setting('lock_timeout') as session_lock_timeout,
       set_config('lock_timeout', $4::text, true), set_config('statement_timeout', $5::text, true)
   ), claim as (
     insert into ${table} (scope, id, state, expires_at)
     select $1::text, $2::text, 'done', now() + $3::bigint * interval '1 millisecond'
     from settings
     where not exists (
       select 1 from ${table} where scope = $1::text and id = $2::text and expires_at > now()
     )
     on conflict (scope, id) do update set state = 'done', token = null, expires_at = excluded.expires_at,
       handled_at = now()
     where ${table}.expires_at <= now()
     returning txid_current()::text as xid
   )${ordered ? `, ${ordered.cte("claim", "$6::text")}` : ""}
   select xid, null::text as state${ordered ? ", (select positions from flag_row)" : ""},
     set_config('lock_timeout', (select session_lock_timeout from settings), true) as lock_timeout
   from claim
   union all
   select null, state${ordered ? ", null" : ""}, null from ${table}
   where scope = $1::text and id = $2::text and expires_at > now() and not exists (select 1 from claim)`;
}
