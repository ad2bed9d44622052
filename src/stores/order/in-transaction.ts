// Ordered delivery inside a store's own transaction (the Postgres and SQLite inboxes, a worker
// that runs an event again): the flag's positions are read and written with the handler's
// writes, so "applied" commits with the effects or not at all. The rule is the one the receiver
// uses (src/delivery/order/rule.ts); only where the positions live differs.
import { type FlagPositions, orderEvent, orderedView } from "../../delivery/order/rule.js";
import type { WebhookEvent } from "../../events.js";
import { storedId } from "../../store-contract/keys.js";

/** Reading and writing a flag's positions (their JSON) in the transaction the handler writes in. */
export interface PositionsInTransaction {
  read(flag: string): Promise<string | undefined>;
  write(flag: string, positions: string): Promise<void>;
}

/** What the handler is to see of an event, once its positions are written in the transaction. */
export type OrderedInTransaction = { event: WebhookEvent; stale: boolean };

/** The answer an inbox gives, without running the handler, to an event all of whose changes were stale. */
export function staleReply(): { status: number; headers: Record<string, string> } {
  return { status: 204, headers: { "webhook-stale": "true" } };
}

/**
 * Reads the event's flag positions, decides with the rule, and writes the new positions in the
 * same transaction (undone with it if the delivery is not handled). The transaction holds the
 * flag's row (SQLite's one writer; Postgres's row lock, taken by the write) until it ends, so two
 * deliveries of a flag never decide on the same positions.
 */
export async function orderInTransaction(
  event: WebhookEvent,
  store: PositionsInTransaction,
): Promise<OrderedInTransaction> {
  if (orderEvent(event, undefined) === undefined) return { event, stale: false };
  // The flag is any string the sender signs: its row is keyed by the rule event ids follow, so a
  // NUL or a key past a btree row's size still has a row, and two ill-formed keys never share one.
  const flag = await storedId((event.data as { flag: string }).flag);
  const text = await store.read(flag);
  const decision = orderEvent(event, text === undefined ? undefined : (JSON.parse(text) as FlagPositions));
  if (!decision) return { event, stale: false };
  if (decision.next) await store.write(flag, JSON.stringify(decision.next));
  return { event: orderedView(event, decision), stale: decision.stale };
}
