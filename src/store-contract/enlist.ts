// How a store that holds a handler's effects (a transactional inbox) takes part in the receiver's
// one decision of "handled": the stores' side of the contract with the receiver, beside the
// DedupeStore contract (./contract.ts) the receiver uses for the stores that only remember ids. The inbox runs the handler inside its transaction, but does not
// commit when the handler returns: it enlists the transaction in the delivery, and the receiver
// commits it once the final answer is known to be 2xx (and before that 2xx leaves), or rolls it
// back. Small and free of the receiver, so a store's entry bundles only this.
import type { WebhookEvent } from "../events.js";
import { isThenable } from "../util/thenable.js";

/** A store's part in one delivery: the event id and the handler's effects, made durable or undone once. */
export interface Enlisted {
  /** Makes them durable; rejects when they are not (then the answer is `503 store_unavailable`). */
  commit(): Promise<void>;
  /** Undoes them, so the sender's retry runs the handler again. Never rejects. */
  rollback(): Promise<void>;
  /** How long the store remembers the id once committed, in ms: checked against `maxAge`. */
  retention: number;
}

/** A delivery a receiver is settling, as a store sees it. */
export interface Participation {
  /** Takes `unit` into the delivery's decision: false when the delivery is already decided. */
  enlist(unit: Enlisted): boolean;
}

// One registry per process, shared by every copy of this module (the ES module and CommonJS
// builds, or two installed versions), so a store from one copy finds a receiver from another. A
// Map, not a WeakMap: an entry lives only while the handler runs (the receiver removes it when
// the handler ends), and a WeakMap's entries cost the garbage collector on every delivery.
const KEY = Symbol.for("flag-webhooks.deliveries");
const shared = globalThis as { [KEY]?: Map<WebhookEvent, Participation> };
shared[KEY] ??= new Map();
const registry = shared[KEY];

/**
 * The receiver's side: while `run` runs the handler of `event` (and until what it returns
 * settles), stores that `enlist` take part in `participation`'s decision.
 */
export function delivering<T>(event: WebhookEvent, participation: Participation, run: () => T): T {
  registry.set(event, participation);
  let result: T;
  try {
    result = run();
  } catch (error) {
    registry.delete(event);
    throw error;
  }
  if (!isThenable(result)) {
    registry.delete(event);
    return result;
  }
  const forget = () => void registry.delete(event);
  result.then(forget, forget);
  return result;
}

/**
 * A store's side: puts `unit` in the receiver's decision for `event`. True when a receiver is
 * delivering `event`: it will commit or roll back `unit` itself. False when none is (a queue
 * worker or a test calling the handler directly): the store then decides alone, committing when
 * the handler resolves.
 */
export function enlist(event: WebhookEvent, unit: Enlisted): boolean {
  return registry.get(event)?.enlist(unit) === true;
}

/**
 * An inbox's handler run in its transaction `unit`: enlisted in the receiver's decision when a
 * receiver delivers `event` (the receiver commits or rolls back), settled here otherwise
 * (committed when `run` resolves, rolled back when it throws). `failed` says what a throw of
 * `run` becomes (a store's own failure is `unavailable`: 503, not the handler's 500); a commit
 * that fails is `unavailable`.
 */
export async function runEnlisted(
  event: WebhookEvent,
  unit: Enlisted,
  run: () => unknown,
  failed: (error: unknown) => unknown,
  unavailable: (error: unknown) => unknown,
): Promise<unknown> {
  let enlisted: boolean;
  try {
    enlisted = enlist(event, unit);
  } catch (error) {
    await unit.rollback();
    throw error;
  }
  let value: unknown;
  try {
    value = await run();
  } catch (error) {
    if (!enlisted) await unit.rollback();
    throw failed(error);
  }
  if (!enlisted) await unit.commit().catch((error: unknown) => Promise.reject(unavailable(error)));
  return value;
}

const RETENTION = Symbol.for("flag-webhooks.retention");

/**
 * Marks an `onEvent` made by a store (`inbox.handle(fn)`) with how long the store remembers ids,
 * so a receiver given it checks that against `maxAge` when it is made.
 */
export function withRetention<Handler extends (...args: never[]) => unknown>(
  handler: Handler,
  retention: number,
): Handler {
  Object.defineProperty(handler, RETENTION, { value: retention });
  return handler;
}

/** The retention a store's `onEvent` carries, if it is one. */
export function retentionOf(onEvent: unknown): number | undefined {
  const retention = (onEvent as { [RETENTION]?: unknown } | undefined)?.[RETENTION];
  return typeof retention === "number" ? retention : undefined;
}

/** The header that marks the answer to a duplicate delivery. */
export const DUPLICATE_HEADER = "webhook-duplicate";

/** Marks the reply a store gives for a copy of an event it already has (see {@link duplicateReply}). */
const DUPLICATE = Symbol.for("flag-webhooks.duplicate");

/**
 * What a store that runs the handler itself (an inbox's `handle()`) returns for a copy of an
 * event it already has: `{ status: 204, headers: { "webhook-duplicate": "true" } }`, answered as
 * the receiver answers a duplicate by every adapter, and recorded as a duplicate rather than a
 * handled delivery.
 */
export function duplicateReply(): { status: number; headers: Record<string, string> } {
  // The mark is not enumerable: the reply reads, and compares, as a plain { status, headers }.
  return Object.defineProperty({ status: 204, headers: { [DUPLICATE_HEADER]: "true" } }, DUPLICATE, { value: true });
}

/** Whether `onEvent` returned {@link duplicateReply}'s answer. */
export function isDuplicateReply(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as { [DUPLICATE]?: unknown })[DUPLICATE] === true;
}
