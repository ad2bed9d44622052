// The rule of ordered delivery, once, free of any store or driver: last writer wins, per field.
// A store keeps one record of positions per flag; given an event and that record, the rule says
// which of the event's changes are newer than what was applied (fresh), which are not (stale),
// and the record to write once the delivery is handled. The receiver, the inboxes and a worker
// all call this one function.
import type { FlagChange, FlagField, WebhookEvent } from "../../events.js";
import { comparePositions, instantOf, later, type Position, positionAt, positionOf } from "./position.js";

/**
 * What a store keeps of one flag: the positions last applied. Plain JSON, so any store can keep
 * it as one value.
 */
export interface FlagPositions {
  /**
   * The position of the last whole-flag event (`flag.created` or `flag.deleted`): every field of
   * the flag, in every environment, changed before it is gone, and a change older than it that
   * arrives later is stale.
   */
  reset?: Position;
  /** The last applied position of each field, by {@link fieldKey}; only those after `reset`. */
  fields: Record<string, Position>;
  /**
   * Positions before this one were left out of the record (fields, or the reset), being older than
   * the retention before the flag's newest position: an event before it cannot be judged, and is
   * stale; a whole-flag event after it still has the forgotten fields to reset, unnamed.
   */
  forgotten?: Position;
}

/** What the rule says of one event. */
export interface OrderDecision {
  /** The flag the event belongs to (`data.flag`). */
  flag: string;
  /** Nothing in the event is newer than what was applied: the handler has nothing to do. */
  stale: boolean;
  /** `flag.updated`: the changes newer than the last applied change of their field, in the event's order. */
  fresh: FlagChange[];
  /** `flag.updated`: the changes that are not. */
  staleChanges: FlagChange[];
  /**
   * A whole-flag event that arrived after a newer change of the flag was applied: the only fields
   * it resets (those changed before it); the newer ones stay. Absent when it resets the whole flag.
   */
  resetFields?: FlagField[];
  /** With `resetFields`: the fields changed after the event, which stay; it resets every other one. */
  keptFields?: FlagField[];
  /** The record to write once the delivery is handled; absent when nothing changes. */
  next?: FlagPositions;
}

/**
 * The key of a field in {@link FlagPositions.fields}: the JSON of `[environment, path]` for a
 * change, of `[environment]` for the environment's rollout, so no two fields share a key.
 */
export function fieldKey(field: FlagField): string {
  return JSON.stringify(field.path === undefined ? [field.environment] : [field.environment, field.path]);
}

function fieldOf(key: string): FlagField {
  const [environment, path] = JSON.parse(key) as [string, string?];
  return path === undefined ? { environment } : { environment, path };
}

/** The flag an event is ordered under, or undefined when it takes no part in the order. */
export function orderedFlag(event: WebhookEvent): string | undefined {
  if (event.type === "unknown") return undefined;
  const flag = (event.data as { flag?: unknown }).flag;
  return typeof flag === "string" ? flag : undefined;
}

/**
 * The rule, last writer wins per field: a change's key is (scope, environment, flag, path), its
 * position the event's `createdAt` then its id ({@link positionOf}); it is applied only if its
 * position comes after both the last applied position of its key and the flag's last whole-flag
 * event. `flag.created` and `flag.deleted` reset every field of the flag in every environment;
 * `rollout.step` and `rollout.guard_triggered` are ordered whole, one key per (flag,
 * environment). `undefined` for an event that takes no part (an unknown type, or no
 * `data.flag`): it passes untouched. `positions` is the flag's record, absent when none is kept.
 *
 * `retention` (ms, the store's) bounds the record to write: positions older than `retention`
 * before the flag's newest one are left out. Every event a receiver with `maxAge` can still accept
 * is newer than them (the receiver checks the retention against `maxAge` and the clock skew), and
 * is judged the same with them or without: it comes after each. One older (a retry past the
 * retention, or an event without `maxAge`) cannot be judged, and is stale: it never overwrites a
 * newer value. A late whole-flag event is told the fields it keeps (`keptFields`), which it can
 * always name, besides those it resets.
 */
export function orderEvent(
  event: WebhookEvent,
  positions: FlagPositions | undefined,
  retention?: number,
): OrderDecision | undefined {
  const flag = orderedFlag(event);
  if (flag === undefined) return undefined;
  const at = positionOf(event);
  const record = positions ?? { fields: {} };
  if (record.forgotten !== undefined && comparePositions(at, record.forgotten) < 0) {
    return { flag, stale: true, fresh: [], staleChanges: event.type === "flag.updated" ? event.data.changes : [] };
  }
  const decision = decide(event, flag, at, record);
  if (decision.next && retention !== undefined) decision.next = forget(decision.next, retention);
  return decision;
}

function decide(event: WebhookEvent, flag: string, at: Position, record: FlagPositions): OrderDecision {
  switch (event.type) {
    case "flag.updated":
      return changes(flag, event.environment, event.data.changes, at, record);
    case "flag.created":
    case "flag.deleted":
      return wholeFlag(flag, at, record);
    default:
      return field(flag, { environment: event.environment }, at, record);
  }
}

/** `record` without the positions more than `retention` ms before its newest, `forgotten` raised past them. */
function forget(record: FlagPositions, retention: number): FlagPositions {
  let newest = record.reset;
  for (const position of Object.values(record.fields)) newest = later(newest, position);
  const instant = instantOf(newest);
  if (!Number.isFinite(instant - retention)) return record;
  const cutoff = positionAt(instant - retention);
  const fields: Record<string, Position> = {};
  let dropped = false;
  for (const [key, position] of Object.entries(record.fields)) {
    if (comparePositions(position, cutoff) >= 0) fields[key] = position;
    else dropped = true;
  }
  const next: FlagPositions = { fields };
  if (record.reset !== undefined) {
    if (comparePositions(record.reset, cutoff) >= 0) next.reset = record.reset;
    else dropped = true;
  }
  const forgotten = dropped ? later(record.forgotten, cutoff) : record.forgotten;
  if (forgotten !== undefined) next.forgotten = forgotten;
  return next;
}

/** Whether `at` comes after the field's last applied position and the flag's last reset. */
function isFresh(at: Position, key: string, record: FlagPositions): boolean {
  const last = later(record.fields[key], record.reset);
  return last === undefined || comparePositions(at, last) > 0;
}

function changes(
  flag: string,
  environment: string,
  all: FlagChange[],
  at: Position,
  record: FlagPositions,
): OrderDecision {
  const fresh: FlagChange[] = [];
  const staleChanges: FlagChange[] = [];
  const written: Record<string, Position> = {};
  for (const change of all) {
    const key = fieldKey({ environment, path: change.path });
    // Two changes of one field in one event share a position: both are fresh, applied in order.
    if (isFresh(at, key, record)) {
      fresh.push(change);
      written[key] = at;
    } else {
      staleChanges.push(change);
    }
  }
  const decision: OrderDecision = { flag, stale: fresh.length === 0 && staleChanges.length > 0, fresh, staleChanges };
  if (fresh.length > 0) decision.next = { ...record, fields: { ...record.fields, ...written } };
  return decision;
}

function field(flag: string, which: FlagField, at: Position, record: FlagPositions): OrderDecision {
  const key = fieldKey(which);
  if (!isFresh(at, key, record)) return { flag, stale: true, fresh: [], staleChanges: [] };
  return {
    flag,
    stale: false,
    fresh: [],
    staleChanges: [],
    next: { ...record, fields: { ...record.fields, [key]: at } },
  };
}

function wholeFlag(flag: string, at: Position, record: FlagPositions): OrderDecision {
  if (record.reset !== undefined && comparePositions(at, record.reset) <= 0) {
    return { flag, stale: true, fresh: [], staleChanges: [] };
  }
  // The fields changed after this event stay (a late deletion must not undo a newer change);
  // those changed before it are reset, and forgotten: the reset position now stands for them.
  const kept: Record<string, Position> = {};
  const keptFields: FlagField[] = [];
  const resetFields: FlagField[] = [];
  for (const [key, position] of Object.entries(record.fields)) {
    if (comparePositions(position, at) > 0) {
      kept[key] = position;
      keptFields.push(fieldOf(key));
    } else {
      resetFields.push(fieldOf(key));
    }
  }
  const next: FlagPositions = { reset: at, fields: kept };
  if (keptFields.length === 0) return { flag, stale: false, fresh: [], staleChanges: [], next };
  // Late: newer changes were applied. Nothing to reset is still a new reset position to keep,
  // so that a change older than this event that arrives later is stale. Forgotten fields are all
  // older than any event that can still arrive: this one has them to reset.
  const stale = resetFields.length === 0 && record.forgotten === undefined;
  return { flag, stale, fresh: [], staleChanges: [], resetFields, keptFields, next };
}

/**
 * The event the handler sees: `flag.updated` with only its fresh changes in `data.changes` and
 * the stale ones in `staleChanges`; a late whole-flag event with the `resetFields` it resets;
 * any other event as it is.
 */
export function orderedView<Event extends WebhookEvent>(event: Event, decision: OrderDecision): Event {
  if (event.type === "flag.updated") {
    return { ...event, data: { ...event.data, changes: decision.fresh }, staleChanges: decision.staleChanges };
  }
  if (decision.resetFields) return { ...event, resetFields: decision.resetFields, keptFields: decision.keptFields };
  return event;
}
