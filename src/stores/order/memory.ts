import type { FlagPositions } from "../../delivery/order/rule.js";
import { checkScope } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore } from "../../store-contract/order-store.js";

/** Options of {@link MemoryOrderStore}. */
export interface MemoryOrderStoreOptions {
  /** The endpoint this store orders for, as in the shared stores (1 to 100 of `A-Z a-z 0-9 . _ -`). */
  scope?: string;
  /**
   * How long a flag's positions are kept after their last write, in ms (default 24 h). It must
   * outlast `maxAge` by two minutes of clock skew, as `dedupe.ttl` must.
   */
  retention?: number;
  /** The clock, in ms since the epoch; for tests. Default `Date.now`. */
  now?: () => number;
}

interface Flag {
  positions: FlagPositions | undefined;
  written: number;
  /** The hold now running, and when its lease ends. */
  holder: symbol | undefined;
  leaseEnds: number;
  waiting: (() => void)[];
}

/**
 * The embedded positions store for one process: a Map of flags. Deliveries of one flag take
 * turns (one holds it from before its handler runs until the delivery is decided); positions
 * are written only when the delivery is handled, and forgotten `retention` after their last
 * write. For several processes, order on a shared store or in an inbox.
 *
 * @example
 * ```ts
 * webhookHandler({ secret, maxAge: "5m", order: { store: new MemoryOrderStore() }, onEvent });
 * ```
 */
export class MemoryOrderStore implements OrderStore {
  readonly retention: number;
  readonly #flags = new Map<string, Flag>();
  readonly #now: () => number;

  constructor(options: MemoryOrderStoreOptions = {}) {
    const { retention = 86_400_000, now = Date.now, scope } = options;
    if (scope !== undefined) checkScope(scope, "MemoryOrderStore");
    if (!Number.isSafeInteger(retention) || retention < 1) {
      throw new TypeError('flag-webhooks: option "retention" must be a positive whole number of ms');
    }
    this.retention = retention;
    this.#now = now;
  }

  /** The number of flags whose positions are kept now. */
  get size(): number {
    return this.#flags.size;
  }

  async hold(flag: string, lease: number): Promise<OrderHold> {
    for (;;) {
      // The entry is looked up again after each wait: the one waited on may have been forgotten.
      const entry = this.#entry(flag);
      // A hold whose lease ran out is taken over: a process that died mid-handler holds nothing.
      if (entry.holder === undefined || entry.leaseEnds <= this.#now()) return this.#take(flag, entry, lease);
      await new Promise<void>((resolve) => {
        entry.waiting.push(resolve);
        setTimeout(resolve, Math.max(1, entry.leaseEnds - this.#now())).unref?.();
      });
    }
  }

  #take(flag: string, entry: Flag, lease: number): OrderHold {
    const me = Symbol(flag);
    entry.holder = me;
    entry.leaseEnds = this.#now() + lease;
    const end = () => {
      if (entry.holder !== me) return;
      entry.holder = undefined;
      if (entry.positions === undefined) this.#flags.delete(flag);
      // Every waiter looks again; the first to run takes the flag, the others wait on.
      for (const wake of entry.waiting.splice(0)) wake();
    };
    return {
      positions: entry.positions,
      commit: async (next) => {
        if (entry.holder !== me) throw new Error(`flag-webhooks: the hold on flag ${JSON.stringify(flag)} ran out`);
        if (next) {
          entry.positions = next;
          entry.written = this.#now();
          // Re-inserted, so the Map's first entries are always those written longest ago.
          this.#flags.delete(flag);
          this.#flags.set(flag, entry);
        }
        end();
      },
      release: async () => end(),
    };
  }

  #entry(flag: string): Flag {
    const now = this.#now();
    let entry = this.#flags.get(flag);
    if (entry && entry.positions !== undefined && entry.holder === undefined && entry.written + this.retention <= now) {
      entry.positions = undefined;
    }
    if (!entry) {
      entry = { positions: undefined, written: now, holder: undefined, leaseEnds: 0, waiting: [] };
      this.#flags.set(flag, entry);
    }
    this.#sweep(now);
    return entry;
  }

  /** Forgets a few flags whose positions outlived the retention: amortised O(1) per hold. */
  #sweep(now: number): void {
    let seen = 0;
    for (const [flag, entry] of this.#flags) {
      if (++seen > 4) break;
      if (entry.holder === undefined && entry.written + this.retention <= now) {
        this.#flags.delete(flag);
      }
    }
  }
}
