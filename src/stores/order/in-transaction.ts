// Ordered delivery inside a store's own transaction (the Postgres and SQLite inboxes, a worker
// that runs an event again): the flag's positions are read and written with the handler's
// writes, so "applied" commits with the effects or not at all. The rule is the one the receiver
// uses (src/delivery/order/rule.ts); only where the positions live differs.
import { type FlagPositions, orderEvent, orderedFlag, orderedView } from "../../delivery/order/rule.js";
import type { WebhookEvent } from "../../events.js";
import { staleReply } from "../../store-contract/enlist.js";
import { storedId } from "../../store-contract/keys.js";

/** One statement in the transaction the handler writes in, as an inbox (or its worker) runs it. */
export type QueryInTransaction = (
  sql: string,
  params: readonly (string | number | null)[],
) => Promise<readonly Record<string, unknown>[]>;

/** Reading and writing a flag's positions (their JSON) in the transaction the handler writes in. */
export interface PositionsInTransaction {
  read(flag: string): Promise<string | undefined>;
  write(flag: string, positions: string): Promise<void>;
}

/**
 * The key of the row that holds the positions of `event`'s flag, or undefined for an event that
 * takes no part in the order. The flag is any string the sender signs: its row is keyed by the
 * rule event ids follow, so a NUL or a key past a btree row's size still has a row, and two
 * ill-formed keys never share one.
 */
export async function orderedKey(event: WebhookEvent): Promise<string | undefined> {
  const flag = orderedFlag(event);
  return flag === undefined ? undefined : storedId(flag);
}

/** What the handler is to see of an event, once its positions are written in the transaction. */
export type OrderedInTransaction = { event: WebhookEvent; stale: boolean };

/**
 * Reads the event's flag positions, decides with the rule, and writes the new positions in the
 * same transaction (undone with it if the delivery is not handled). The transaction holds the
 * flag's row (SQLite's one writer; Postgres's row lock, taken by the write) until it ends, so two
 * deliveries of a flag never decide on the same positions.
 */
export async function orderInTransaction(
  event: WebhookEvent,
  store: PositionsInTransaction | undefined,
  retention?: number,
): Promise<OrderedInTransaction> {
  const flag = await orderedKey(event);
  if (flag === undefined) return { event, stale: false };
  if (!store) throw new Error("flag-webhooks: the transaction did not read the flag's positions");
  const text = await store.read(flag);
  const decision = orderEvent(event, text === undefined ? undefined : (JSON.parse(text) as FlagPositions), retention);
  if (!decision) return { event, stale: false };
  if (decision.next) await store.write(flag, JSON.stringify(decision.next));
  return { event: orderedView(event, decision), stale: decision.stale };
}

/** An inbox's `order` option, as its handle() and its worker apply it in their transactions. */
export interface TransactionOrder {
  /**
   * The positions, read and written by `query` in the transaction the handler writes in; absent
   * where the transaction reads them with its first statement and writes them with its COMMIT
   * (Postgres), and gives them to {@link runInOrder} as `folded`.
   */
  positions?(query: QueryInTransaction): PositionsInTransaction;
  /** Whether an event all of whose changes are stale still runs the handler. */
  handleStale: boolean;
  /** The inbox's retention, in ms: positions older than it before the flag's newest are forgotten. */
  retention: number;
}

/**
 * Runs `run` with what is fresh of `event`, its flag's positions read and written by `query` in
 * the transaction `run` writes in; an event all of whose changes are stale is answered
 * {@link staleReply} without `run`, unless `handleStale`. Without `order`, `run(event)`. The
 * inboxes' `handle()` and the keep-then-work worker both order through this, so a retried old
 * event is judged as a delivered one is. `storeFailed` says what a failure to read or write the
 * positions becomes. `folded` are the positions of a transaction that reads them with its first
 * statement and writes them with its COMMIT (Postgres), in place of `order.positions(query)`.
 */
export async function runInOrder(
  order: TransactionOrder | undefined,
  query: QueryInTransaction,
  event: WebhookEvent,
  run: (event: WebhookEvent) => unknown,
  storeFailed: (error: unknown) => unknown = (error) => error,
  folded?: PositionsInTransaction,
): Promise<unknown> {
  if (!order) return run(event);
  let ordered: OrderedInTransaction;
  try {
    ordered = await orderInTransaction(event, folded ?? order.positions?.(query), order.retention);
  } catch (error) {
    throw storeFailed(error);
  }
  if (ordered.stale && !order.handleStale) return staleReply();
  return run(ordered.event);
}
