// How a store that holds a handler's effects (a transactional inbox) takes part in the receiver's
// one decision of "handled": the stores' side of the contract with the receiver, beside the
// DedupeStore contract (./dedupe-store.ts) the receiver uses for the stores that only remember
// ids. The inbox runs the handler inside its transaction, but does not commit when the handler returns: it enlists the transaction in the delivery, and the receiver
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
// builds, or two installed versions), so a store from one copy finds a receiver from another. It
// serves only an inbox the receiver cannot see when it is made: one called inside `onEvent` (a
// router's handler, or the app's own function); an `onEvent` that is an inbox's own handler is
// given its delivery directly. A Map, not a WeakMap: an entry lives only while the handler runs
// (the receiver removes it when the handler ends), and a WeakMap's entries cost the garbage
// collector on every delivery.
const KEY = Symbol.for("flag-webhooks.deliveries");
const shared = globalThis as { [KEY]?: Map<WebhookEvent, Participation> };
shared[KEY] ??= new Map();
const registry = shared[KEY];

/**
 * The receiver's side, for an `onEvent` that is not an inbox's own handler: while `run` runs the
 * handler of `event` (and until what it returns settles), an inbox called inside it takes part in
 * `participation`'s decision.
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
 * An inbox's handler, run in one delivery: `delivery` is the receiver's when one delivers the event
 * (then the handler's transaction enlists in it), `undefined` when none does (a queue worker or a
 * test calling the handler directly: the inbox decides alone).
 */
export type InboxRun<Context extends unknown[]> = (
  delivery: Participation | undefined,
  event: WebhookEvent,
  ...context: Context
) => Promise<unknown>;

/** What an inbox's `onEvent` carries for a receiver given it: the store's retention, and its run. */
export interface Inbox {
  /** How long the store remembers ids, in ms: checked against `maxAge` when the receiver is made. */
  retention: number;
  /** The handler, given the receiver's delivery at once: no registry to look it up in. */
  run: InboxRun<unknown[]>;
}

const INBOX = Symbol.for("flag-webhooks.inbox");

/**
 * Makes an inbox's `onEvent` (`inbox.handle(fn)`) from its `run`: a receiver given it as `onEvent`
 * sees that when it is made (it checks `retention` against `maxAge` then, and watches the answer of
 * each delivery from the start); called by anything else (a router, the app's own `onEvent`, a
 * queue worker), it finds the delivery being settled for its event, if any, in the registry.
 */
export function inboxHandler<Context extends unknown[]>(
  retention: number,
  run: InboxRun<Context>,
): (event: WebhookEvent, ...context: Context) => Promise<unknown> {
  const handler = (event: WebhookEvent, ...context: Context) => run(registry.get(event), event, ...context);
  const inbox: Inbox = { retention, run: run as InboxRun<unknown[]> };
  Object.defineProperty(handler, INBOX, { value: inbox });
  return handler;
}

/** The inbox an `onEvent` is the handler of (see {@link inboxHandler}), if it is one. */
export function inboxOf(onEvent: unknown): Inbox | undefined {
  return (onEvent as { [INBOX]?: Inbox } | undefined)?.[INBOX];
}

/**
 * An inbox's handler run in its transaction `unit`: enlisted in `delivery`'s decision when a
 * receiver delivers the event (the receiver commits or rolls back), settled here otherwise
 * (committed when `run` resolves). When `run` throws, the unit is rolled back here at once,
 * enlisted or not: an `onEvent` that catches the error may still answer 2xx, and a handler that
 * threw must not have its writes committed. `failed` says what a throw of `run` becomes (a
 * store's own failure is `unavailable`: 503, not the handler's 500); a commit that fails is
 * `unavailable`.
 */
export async function runEnlisted(
  delivery: Participation | undefined,
  unit: Enlisted,
  run: () => unknown,
  failed: (error: unknown) => unknown,
  unavailable: (error: unknown) => unknown,
): Promise<unknown> {
  let threw = false;
  // What the decision settles: nothing once the handler threw (the unit was rolled back then).
  const part: Enlisted = {
    commit: () => (threw ? Promise.resolve() : unit.commit()),
    rollback: () => (threw ? Promise.resolve() : unit.rollback()),
    retention: unit.retention,
  };
  let enlisted: boolean;
  try {
    enlisted = delivery?.enlist(part) === true;
  } catch (error) {
    await unit.rollback();
    throw error;
  }
  let value: unknown;
  try {
    value = await run();
  } catch (error) {
    threw = true;
    await unit.rollback();
    throw failed(error);
  }
  if (!enlisted) await unit.commit().catch((error: unknown) => Promise.reject(unavailable(error)));
  return value;
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

/** The header that marks the answer to an event all of whose changes were stale (the `order` option). */
export const STALE_HEADER = "webhook-stale";

/** Marks the reply a store gives for an event all of whose changes were stale (see {@link staleReply}). */
const STALE = Symbol.for("flag-webhooks.stale");

/**
 * What a store that orders inside its own transaction (an inbox's `handle()` with `order`)
 * returns, without running the handler, for an event all of whose changes were stale: `{ status:
 * 204, headers: { "webhook-stale": "true" } }`, recorded as stale rather than handled, as the
 * receiver records a stale event its order store judged.
 */
export function staleReply(): { status: number; headers: Record<string, string> } {
  return Object.defineProperty({ status: 204, headers: { [STALE_HEADER]: "true" } }, STALE, { value: true });
}

/** What `onEvent` returning `value` is recorded as when it is a store's marked reply: a duplicate, or stale. */
export function replyOutcome(value: unknown): "duplicate" | "stale" | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const marks = value as { [DUPLICATE]?: unknown; [STALE]?: unknown };
  if (marks[DUPLICATE] === true) return "duplicate";
  return marks[STALE] === true ? "stale" : undefined;
}
