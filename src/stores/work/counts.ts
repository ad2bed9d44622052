// How many kept events an inbox holds in each state, and since when the oldest waiting one waits:
// what `inbox.counts()` answers, for the command's progress line and the OpenTelemetry gauges.
import type { KeepRow } from "./database.js";
import type { Dialect } from "./statements.js";
import { WAITING } from "./states.js";
import type { InboxCounts } from "./types.js";

/** The statement that counts a scope's kept events by state, with the oldest received time of each. (scope) */
export function countsStatement(t: string, d: Dialect): string {
  return `select state, count(*) as count, min(received_at) as oldest from ${t}
    where scope = ${d.param(1, "text")} and ${WAITING}
    group by state`;
}

/** The counts from the statement's rows (a state with no row has none). */
export function countsOf(rows: readonly KeepRow[]): InboxCounts {
  const counts: InboxCounts = { pending: 0, running: 0, parked: 0, oldestWaitingSince: null };
  for (const row of rows) {
    const state = String(row.state);
    if (state !== "pending" && state !== "running" && state !== "parked") continue;
    counts[state] = Number(row.count);
    if (state === "parked" || row.oldest === null || row.oldest === undefined) continue;
    const oldest = Number(row.oldest);
    if (counts.oldestWaitingSince === null || oldest < counts.oldestWaitingSince) counts.oldestWaitingSince = oldest;
  }
  return counts;
}
