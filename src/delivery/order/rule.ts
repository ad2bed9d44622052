// The rule of ordered delivery, once, free of any store or driver: last writer wins, per field.
// A store keeps one record of positions per flag; given an event and that record, the rule says
// which of the event's changes are newer than what was applied (fresh), which are not (stale),
// and the record to write once the delivery is handled. The receiver, the inboxes and a worker
// all call this one function.
import type { FlagChange, FlagField, WebhookEvent } from "../../events.js";
import { comparePositions, later, type Position, positionOf } from "./position.js";

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
 */
export function orderEvent(event: WebhookEvent, positions: FlagPositions | undefined): OrderDecision | undefined {
  const flag = orderedFlag(event);
  if (flag === undefined) return undefined;
  const at = positionOf(event);
  const record = positions ?? { fields: {} };
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
  const resetFields: FlagField[] = [];
  for (const [key, position] of Object.entries(record.fields)) {
    if (comparePositions(position, at) > 0) kept[key] = position;
    else resetFields.push(fieldOf(key));
  }
  const next: FlagPositions = { reset: at, fields: kept };
  if (Object.keys(kept).length === 0) return { flag, stale: false, fresh: [], staleChanges: [], next };
  // Late: newer changes were applied. Nothing to reset is still a new reset position to keep,
  // so that a change older than this event that arrives later is stale.
  return { flag, stale: resetFields.length === 0, fresh: [], staleChanges: [], resetFields, next };
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
  if (decision.resetFields) return { ...event, resetFields: decision.resetFields };
  return event;
}
