// The states of a row of an inbox table, and what "due" means: decided here once, for the
// Postgres and the SQLite inbox alike (their statements are built from this, in ./statements.ts).

/**
 * A row's state. `claimed` and `done` are `handle()`'s (and the DedupeStore's); keep-then-work
 * adds `pending` (kept, waiting for its next attempt), `running` (taken by a worker, under a
 * lease) and `parked` (its attempts are spent, or its body no longer parses: kept until replayed
 * or purged). A kept event ends `done`, as one `handle()` ran.
 */
export type InboxState = "claimed" | "done" | "pending" | "running" | "parked";

/** Every state, in the order of the table's check constraint. */
export const STATES: readonly InboxState[] = ["claimed", "done", "pending", "running", "parked"];

/** The states of a kept event that a copy of it finds there: a duplicate, as a `done` one is. */
export const KEPT: readonly InboxState[] = ["pending", "running", "parked"];

/**
 * The states whose copy is a duplicate, however it comes (`enqueue()`, `handle()`, a DedupeStore
 * claim): handled, or kept (a worker runs it, or it waits parked for a replay). Either way the
 * sender's delivery was received, and a copy must neither run it again nor wait for it.
 */
export const RECEIVED: readonly InboxState[] = ["done", ...KEPT];

/** Whether a copy of an event whose row is in `state` is a duplicate (see {@link RECEIVED}). */
export function received(state: unknown): boolean {
  return RECEIVED.includes(state as InboxState);
}

/**
 * The condition of a due row, with `now` the SQL of the clock's value: pending and its next
 * attempt's time has come, or running and its lease has lapsed (the worker that took it stopped,
 * or hung past it: its attempt was counted when it took it).
 */
export function dueCondition(now: string): string {
  return `((state = 'pending' and next_at <= ${now}) or (state = 'running' and lease_until <= ${now}))`;
}

/** The SQL list of `states`, for `state in (…)`. */
export function stateList(states: readonly InboxState[]): string {
  return `(${states.map((state) => `'${state}'`).join(", ")})`;
}

// The conditions of the inbox's two partial indexes, written once for the indexes and for the
// statements they serve: a table holds mostly done ids (kept for the retention), and a statement
// that proves neither condition reads every row of the scope. SQLite matches a partial index's
// condition term by term, and Postgres proves none from a list of three states, so a statement
// reads by an index only where it holds the index's condition as written here.

/** The due index's condition: events waiting for an attempt or running one (the worker reads it). */
export const IN_WORK = "state in ('pending', 'running')";

/** The parked index's condition: events whose attempts are spent (parked(), the counts, replay). */
export const PARKED = "state = 'parked'";

/** Every event a worker has yet to finish, as one term per index (the counts). */
export const WAITING = `(${IN_WORK} or ${PARKED})`;

/**
 * The statement that makes the index of parked events, oldest first, named `name`, on `table`
 * (both quoted).
 */
export function parkedIndex(table: string, name: string): string {
  return `create index if not exists ${name} on ${table} (scope, received_at) where ${PARKED}`;
}
