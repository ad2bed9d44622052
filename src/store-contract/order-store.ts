// The contract of a store that keeps the positions of ordered delivery (the `order` option):
// beside the DedupeStore contract, for the stores that do not hold the handler's effects. The
// inboxes keep positions in the handler's own transaction instead, and need none of this.
import type { FlagPositions } from "../delivery/order/rule.js";
import type { ClaimResult, DedupeStore } from "./dedupe-store.js";

/**
 * Where a receiver with `order` keeps, per flag, the positions last applied
 * ({@link FlagPositions}). One delivery at a time holds a flag: it reads the flag's positions
 * when its handler is about to run and writes the new ones only once the delivery is handled, so
 * two deliveries of one flag never apply their changes at the same time.
 * {@link MemoryOrderStore} implements it.
 */
export interface OrderStore {
  /**
   * Holds `flag` for one delivery, waiting while another delivery holds it, and reads its
   * positions. `flag` is the event's `data.flag` as event ids are stored (as it is when usual; `#`
   * and its SHA-256 when over 1 KiB, with a NUL or a lone surrogate), so any backend can key it. A hold lasts at most `lease` ms, so a process that dies mid-handler cannot keep
   * the flag for ever. `wait` is how long the caller waits for the hold, in ms: a hold that comes
   * later is released by the receiver, but a store whose waiting goes on where no caller is left
   * to release it (an OrderObject, after its Worker answered) must not take the flag once `wait`
   * has passed, and rejects instead.
   */
  hold(flag: string, lease: number, wait?: number): OrderHold | Promise<OrderHold>;
  /**
   * How long the store keeps a flag's positions after their last write, in ms: checked against
   * `maxAge`, since an event older than the positions' retention could be applied over a newer one.
   */
  readonly retention: number;
  /**
   * Optional: a way to claim an event's id on `dedupe` and hold its flag together, when this
   * store and `dedupe` share a backend: in one request (a RedisOrderStore and a RedisDedupeStore
   * on one client), or with a hold whose end settles the claim too (`settles`: its commit marks
   * `id` done for `ttl` ms, its release frees the claim, each in the request that ends the hold; a
   * DynamoDBOrderStore and a DynamoDBDedupeStore on one client and table). Undefined when it
   * cannot: the receiver then claims, then holds. Asked once, when a receiver with both `dedupe`
   * and `order` is made.
   */
  pairedClaim?(
    dedupe: DedupeStore,
  ):
    | ((
        id: string,
        claimLease: number,
        flag: string,
        holdLease: number,
        ttl: number,
      ) => Promise<{ claim: ClaimResult; hold: OrderHold | undefined; settles?: boolean }>)
    | undefined;
}

/**
 * What {@link OrderStore.pairedClaim} gives: claims `id` for `claimLease` ms and, when it is
 * claimed, holds `flag` for `holdLease` ms; the hold is undefined when the id was not claimed or
 * another delivery holds the flag (the receiver then waits for it with {@link OrderStore.hold}).
 * With `settles`, the hold's end marks the id done (for `ttl` ms, the dedupe ttl) or frees it.
 * Internal: derived from the interface, which spells it out.
 */
export type PairedClaim = NonNullable<ReturnType<NonNullable<OrderStore["pairedClaim"]>>>;

/** One delivery's hold on a flag's positions. */
export interface OrderHold {
  /** The flag's positions when the hold began; undefined when none are kept. */
  readonly positions: FlagPositions | undefined;
  /**
   * Writes `next` (nothing when undefined) and ends the hold. Rejects, writing nothing, when the
   * hold's lease has run out and another delivery may hold the flag.
   */
  commit(next: FlagPositions | undefined): Promise<void>;
  /** Ends the hold and writes nothing. Never rejects. */
  release(): Promise<void>;
}
