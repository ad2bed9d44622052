// Ordered delivery's part in the receiver (the `order` option): before the handler runs, the
// delivery holds its flag's positions and the handler sees only what is newer; the new positions
// are a unit of the settlement, written when the delivery is decided handled and dropped
// otherwise, as an inbox's transaction is committed or rolled back.

import { orderEvent, orderedView } from "../delivery/order/rule.js";
import { checkRetention } from "../delivery/replay-window.js";
import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { DedupeStore } from "../store-contract/dedupe-store.js";
import { type Enlisted, STALE_HEADER } from "../store-contract/enlist.js";
import { storedId } from "../store-contract/keys.js";
import type { OrderHold, OrderStore, PairedClaim } from "../store-contract/order-store.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";
import { withTimeout } from "../util/timeout.js";
import type { DedupeSettings } from "./options.js";
import type { Answer } from "./protocol.js";

/** Ordered delivery, last writer wins per field: see docs/order.md. */
export interface OrderOptions {
  /** Where the positions are kept: a {@link MemoryOrderStore} for one process, or a shared store. */
  store: OrderStore;
  /**
   * Calls the handler for an event all of whose changes are stale, too (with `data.changes`
   * empty); by default such an event is answered `204` with `Webhook-Stale: true` without it.
   */
  handleStale?: boolean;
  /**
   * How long a delivery holds its flag at most (default 60 s), so a process that dies
   * mid-handler does not block the flag for ever. Longer than your slowest handler.
   */
  lease?: number | string;
  /**
   * How long a delivery waits for its flag (another delivery of it running) and for the store,
   * before `503 store_unavailable` so the sender retries later (default 10 s).
   */
  timeout?: number | string;
}

/** The `order` option, checked and in milliseconds. */
export interface OrderSettings {
  store: OrderStore;
  handleStale: boolean;
  lease: number;
  timeout: number;
  /** The dedupe store's claim and the hold in one request, when the two stores can (see {@link OrderStore.pairedClaim}). */
  paired: PairedClaim | undefined;
}

export { STALE_HEADER } from "../store-contract/enlist.js";

/** Checks the `order` option when the receiver is made (with the dedupe store, if any, to pair with). */
export function orderSettings(order: OrderOptions, maxAge: number | undefined, dedupe?: DedupeStore): OrderSettings {
  const store = order?.store;
  if (!store || typeof store.hold !== "function" || typeof store.retention !== "number") {
    throw new TypeError('flag-webhooks: option "order.store" must be an OrderStore (hold, retention)');
  }
  checkRetention(store.retention, maxAge, "the order store's retention");
  return {
    store,
    handleStale: order.handleStale === true,
    lease: order.lease === undefined ? 60_000 : parseDuration(order.lease, "order.lease", TIMER_MAX),
    timeout: order.timeout === undefined ? 10_000 : parseDuration(order.timeout, "order.timeout", TIMER_MAX),
    paired: dedupe === undefined ? undefined : store.pairedClaim?.(dedupe),
  };
}

/**
 * With a paired claim: dedupe settings whose claim holds the event's flag in the same request,
 * and the hold it took (undefined when the flag was held by another delivery, or the id not
 * claimed). Undefined when the stores are not paired or the event is not ordered.
 */
export function claimWithHold(
  event: WebhookEvent,
  dedupe: DedupeSettings,
  settings: OrderSettings,
): { dedupe: DedupeSettings; held(): OrderHold | undefined } | undefined {
  const { paired } = settings;
  if (!paired || orderEvent(event, undefined) === undefined) return undefined;
  const { flag } = event.data as { flag: string };
  const { store } = dedupe;
  let hold: OrderHold | undefined;
  let taken = false;
  // With a hold that settles the claim: once its end was sent, the id is marked done or freed by it.
  let settled = false;
  const claiming: DedupeStore = {
    async claim(id, lease) {
      // The flag keyed by the same rule as an unpaired hold's (see orderDelivery).
      const both = await paired(id, lease, await storedId(flag), settings.lease, dedupe.ttl);
      hold = both.hold && both.settles === true ? settling(both.hold, () => (settled = true)) : both.hold;
      return both.claim;
    },
    complete: (id, ttl) => (settled ? undefined : store.complete(id, ttl)),
    release(id) {
      // A claim the receiver gave up on (it came too late) holds its flag for nobody.
      if (!taken) void hold?.release();
      return settled ? Promise.resolve() : store.release(id);
    },
  };
  return {
    dedupe: { ...dedupe, store: claiming },
    held() {
      taken = true;
      return hold;
    },
  };
}

/** `hold`, which calls `ended` once its commit wrote (the id marked done with it) or its release was sent. */
function settling(hold: OrderHold, ended: () => void): OrderHold {
  return {
    positions: hold.positions,
    async commit(next) {
      await hold.commit(next);
      ended();
    },
    release() {
      ended();
      return hold.release();
    },
  };
}

/** A delivery once ordered: the event its handler sees, and the positions to write once it is handled. */
export interface Ordered {
  event: WebhookEvent;
  /** Every change was stale (and `handleStale` is off): answer {@link staleAnswer} without the handler. */
  stale: boolean;
  /** The settlement's unit: writes the positions, or releases the flag. Absent for an unordered event. */
  unit?: Enlisted;
}

/**
 * Holds the event's flag (or takes `held`, the hold a paired claim took) and decides what is fresh;
 * rejects with `503 store_unavailable` when the store fails.
 */
export async function orderDelivery(event: WebhookEvent, settings: OrderSettings, held?: OrderHold): Promise<Ordered> {
  if (orderEvent(event, undefined) === undefined) return { event, stale: false };
  // A flag is any string the sender signs: every store is handed it as event ids are stored, so
  // each backend can key it (no NUL, a bounded length) and ill-formed flags never share a key.
  const flag = await storedId((event.data as { flag: string }).flag);
  const unavailable = () => new WebhookError("store_unavailable", "the order store did not answer; retry later");
  let hold = held as OrderHold;
  try {
    hold ??= await withTimeout(
      settings.store.hold(flag, settings.lease, settings.timeout),
      settings.timeout,
      unavailable,
      (late) => {
        void late.release();
      },
    );
  } catch (cause) {
    if (cause instanceof WebhookError) throw cause;
    throw new WebhookError("store_unavailable", "the order store failed; retry later", { cause });
  }
  const decision = orderEvent(event, hold.positions, settings.store.retention);
  if (!decision) throw new Error("flag-webhooks: an event's order changed while it was held");
  const unit: Enlisted = {
    commit: () => withTimeout(hold.commit(decision.next), settings.timeout, unavailable),
    rollback: () => hold.release(),
    retention: settings.store.retention,
  };
  return { event: orderedView(event, decision), stale: decision.stale && !settings.handleStale, unit };
}

/** The answer to an event all of whose changes were stale: handled, nothing to do. */
export function staleAnswer(): Answer {
  return { status: 204, headers: { [STALE_HEADER]: "true" }, body: null, close: false };
}
