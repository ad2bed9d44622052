// One attempt at a kept event: take it (a short committed transaction that counts the attempt and
// sets a lease, so a process that dies mid-handler still used it up), then run the handler in a
// transaction that locks the row and commits the "done" mark with the handler's writes. A failure
// is recorded in a transaction of its own, with the next attempt's time from the schedule.
import { parseEvent, type WebhookEvent } from "../../events.js";
import type { InboxTelemetry } from "../../telemetry.js";
import { withTimeout } from "../../util/timeout.js";
import { orderedKey, runInOrder, type TransactionOrder } from "../order/in-transaction.js";
import type { HeldTransaction, KeepDatabase, KeepRow } from "./database.js";
import { attemptsOf, nextAttemptAt, type Schedule } from "./schedule.js";
import type { KeepStatements } from "./statements.js";
import type { KeptHandler } from "./types.js";

/** An event a worker took: running, or parked by the take when it had no attempt left. */
export interface Taken {
  id: string;
  state: string;
  attempt: number;
  body: string;
  /** The trace context kept with the event (JSON text fields), or null. */
  trace: string | null;
}

/** The bounds of each attempt, checked once. */
export interface Plan {
  schedule: Schedule;
  deadline: number;
  lease: number;
  /** Where each attempt's span and outcome are reported, when given. */
  telemetry?: InboxTelemetry | undefined;
}

/** Where the attempts run: the database, its statements, the scope, the clock. */
export interface Ground {
  db: KeepDatabase;
  sql: KeepStatements;
  scope: string;
  retention: number;
  now: () => number;
  /** The inbox's `order`, applied in each attempt's transaction: a retried old event never undoes a newer one. */
  order?: TransactionOrder | undefined;
}

/** How an attempt ended: done, failed (to be retried), parked, or not this worker's any more. */
export type Outcome = "done" | "failed" | "parked" | "lost";

/** Takes up to `limit` due events (only `id`, when given). */
export async function take(ground: Ground, plan: Plan, limit: number, id: string | null = null): Promise<Taken[]> {
  const { db, sql, scope, now } = ground;
  const rows = await db.query(sql.take, [scope, now(), plan.lease, attemptsOf(plan.schedule), limit, id]);
  return rows.map((row: KeepRow) => ({
    id: String(row.id),
    state: String(row.state),
    attempt: Number(row.attempts),
    body: String(row.body ?? ""),
    trace: row.trace_context === null || row.trace_context === undefined ? null : String(row.trace_context),
  }));
}

/** Runs one attempt of a taken (running) event with `fn`. */
export async function attempt<Tx>(ground: Ground, plan: Plan, taken: Taken, fn: KeptHandler<Tx>): Promise<Outcome> {
  const { db, sql, scope } = ground;
  let event: WebhookEvent;
  try {
    event = parseEvent(taken.body);
  } catch (error) {
    // The body was verified when it came; a parser that refuses it now (after an upgrade) will
    // refuse it on every attempt: parked with the reason, not retried.
    return fail(ground, plan, taken, `the body no longer parses: ${messageOf(error)}`, true);
  }
  const flag = ground.order ? await orderedKey(event) : undefined;
  const begun = db.begin(sql.lock, [scope, taken.id, taken.attempt], flag);
  let open: HeldTransaction;
  try {
    // Waiting for a connection (or SQLite's turn) is not the handler's time: it has a bound of its
    // own, and the handler's deadline starts once the transaction has begun.
    open = await withTimeout(
      begun,
      plan.deadline,
      () => new Error(`attempt ${taken.attempt} found no free connection within its deadline of ${plan.deadline} ms`),
      (late) => void late.rollback(),
    );
  } catch (error) {
    // A transaction that begins later holds the row's lock for nobody: rolled back as it comes.
    return fail(ground, plan, taken, messageOf(error), false);
  }
  if (open.rows.length === 0) {
    // Taken by another worker after this one's lease lapsed, or purged: not ours to run.
    await open.rollback();
    return "lost";
  }
  return run(ground, plan, taken, open, event, fn);
}

/** Runs the handler in the attempt's transaction `open`, within the deadline, and marks it done or failed. */
async function run<Tx>(
  ground: Ground,
  plan: Plan,
  taken: Taken,
  open: HeldTransaction,
  event: WebhookEvent,
  fn: KeptHandler<Tx>,
): Promise<Outcome> {
  const { sql, scope } = ground;
  const gaveUp = new AbortController();
  const timer = setTimeout(
    () => gaveUp.abort(new Error(`attempt ${taken.attempt} ran past its deadline of ${plan.deadline} ms`)),
    plan.deadline,
  );
  const expired = new Promise<never>((_, reject) => {
    gaveUp.signal.addEventListener("abort", () => reject(gaveUp.signal.reason), { once: true });
  });
  expired.catch(() => {});
  try {
    const handler = (seen: WebhookEvent) => fn(seen, open.tx as Tx, { attempt: taken.attempt, signal: gaveUp.signal });
    // An event all of whose changes are stale is marked done without the handler (unless handleStale).
    await Promise.race([runInOrder(ground.order, open.query, event, handler, undefined, open.positions), expired]);
    const marked = await Promise.race([
      open.query(sql.done, [scope, taken.id, ground.now(), ground.retention, taken.attempt]),
      expired,
    ]);
    if (marked.length === 0) {
      await open.rollback();
      return "lost";
    }
    await Promise.race([open.commit(), expired]);
    return "done";
  } catch (error) {
    if (gaveUp.signal.aborted) await open.abandon();
    else await open.rollback();
    return fail(ground, plan, taken, messageOf(error), false);
  } finally {
    clearTimeout(timer);
  }
}

/** Records a failed attempt: pending again at the schedule's next time, or parked. */
async function fail(ground: Ground, plan: Plan, taken: Taken, reason: string, park: boolean): Promise<Outcome> {
  const next = park ? undefined : nextAttemptAt(plan.schedule, taken.attempt, ground.now());
  await ground.db.query(ground.sql.fail, [ground.scope, taken.id, taken.attempt, reason, next ?? null]);
  return next === undefined ? "parked" : "failed";
}

/** What is recorded of a failure: its message, cut to 1,000 characters. */
function messageOf(error: unknown): string {
  const message = textOf(error instanceof Error ? error.message : error).replaceAll("\u0000", "\\u0000");
  return message.length > 1000 ? `${message.slice(0, 999)}…` : message;
}

/**
 * What a handler threw, as text, whatever it is: recording the failure must not fail with it, or
 * the event stays running until its lease lapses. An object without a prototype has no toString
 * (String() throws), a message set to an object cannot be bound by better-sqlite3, and Postgres
 * text cannot hold a NUL (written as \u0000 by messageOf).
 */
function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    const json = typeof value === "object" && value !== null ? JSON.stringify(value) : undefined;
    return json ?? String(value);
  } catch {
    return typeof value;
  }
}
