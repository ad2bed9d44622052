import type { ClaimResult, DedupeStore } from "../store-contract/dedupe-store.js";
import { checkScope } from "../store-contract/keys.js";
import { isFiniteNumber } from "../util/finite.js";

/** Options of {@link MemoryDedupeStore}. */
export interface MemoryDedupeStoreOptions {
  /**
   * The endpoint this store dedupes for (1 to 100 characters of `A-Z a-z 0-9 . _ -`), as in the
   * shared stores. Optional here: a MemoryDedupeStore is never shared beyond its own instance, so
   * give each endpoint its own store; the scope makes swapping in {@link RedisDedupeStore} a
   * change of class only.
   */
  scope?: string;
  /** The most ids kept; past it the oldest is forgotten first. Default 100,000. */
  maxKeys?: number;
  /** The clock, in ms since the epoch; for tests. Default `Date.now`. */
  now?: () => number;
}

const DONE = 0;
const CLAIMED = 1;
/** An entry taken out of the Map: one kept elsewhere (the oldest seen) reads as gone, with no lookup. */
const GONE = 2;
/** An id's state (done, claimed, or no longer in the Map) and when it expires, in ms since the epoch. */
type Entry = [state: typeof DONE | typeof CLAIMED | typeof GONE, expiresAt: number];

/**
 * The embedded dedupe store for one process: a Map of ids with expiry times, bounded by
 * `maxKeys` (oldest evicted first) and swept as it is used, so memory cannot grow without limit.
 * Instances that do not share memory (several processes or machines) need
 * {@link RedisDedupeStore}. Each store dedupes one endpoint: two endpoints in one process (two
 * webhook subscriptions) each get a store of their own, or an event sent to both runs once.
 *
 * @example
 * ```ts
 * app.post("/webhooks", webhookMiddleware({ secret, dedupe: { store: new MemoryDedupeStore(), ttl: 86_400_000 }, onEvent }));
 * ```
 */
export class MemoryDedupeStore implements DedupeStore {
  // id → [state, expiresAt]; Map keeps insertion order, and every write re-inserts, so the first
  // entry is always the one written longest ago.
  readonly #ids = new Map<string, Entry>();
  readonly #maxKeys: number;
  readonly #now: () => number;
  // The oldest entry is found with one long-lived iterator, not a new one per write: a Map keeps
  // deleted entries as holes until it rehashes, and a fresh iterator walks every hole left by
  // evicting from the front (tens of µs per write once the store is full).
  #cursor: MapIterator<[string, Entry]> | undefined;
  #head: [string, Entry] | undefined;
  /**
   * The id written last, and its entry: a claim's completion that follows it changes it in place.
   * Forgotten when that entry is deleted, so while it is set the entry is the Map's newest.
   */
  #lastId: string | undefined;
  #lastEntry: Entry | undefined;

  constructor(options: MemoryDedupeStoreOptions = {}) {
    const { maxKeys = 100_000, now = Date.now, scope } = options;
    if (scope !== undefined) checkScope(scope, "MemoryDedupeStore");
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new TypeError('flag-webhooks: option "maxKeys" must be a positive whole number');
    }
    this.#maxKeys = maxKeys;
    this.#now = now;
  }

  /** The number of ids held now, expired ones not yet swept included. */
  get size(): number {
    return this.#ids.size;
  }

  claim(id: string, lease: number): ClaimResult {
    const now = this.#now();
    // A clock that names no instant would make every entry look expired: dedupe off, silently.
    if (!isFiniteNumber(now)) {
      throw new TypeError("flag-webhooks: MemoryDedupeStore's now() must return a finite number of ms");
    }
    const held = this.#ids.get(id);
    if (held && held[1] > now) return held[0] === DONE ? "done" : "in_flight";
    // An id not held needs no delete before it is written: the Map has no entry of it to move.
    if (held) this.#remove(id, held);
    this.#write(id, CLAIMED, now + lease, now);
    return "claimed";
  }

  complete(id: string, ttl: number): void {
    const now = this.#now();
    const last = this.#lastEntry;
    if (this.#lastId === id && last !== undefined) {
      // The id written last (its claim, a moment ago) is still the newest entry: re-inserting it
      // would leave the order as it is, so it is changed where it stands (no delete, no new entry,
      // no lookup).
      last[0] = DONE;
      last[1] = now + ttl;
      this.#sweep(now);
      return;
    }
    this.#set(id, DONE, now + ttl, now);
  }

  release(id: string): void {
    const held = this.#ids.get(id);
    if (held && held[0] !== DONE) this.#remove(id, held);
  }

  /** Takes `id`'s entry out of the Map, marked gone for whoever still keeps it. */
  #remove(id: string, entry: Entry): void {
    this.#ids.delete(id);
    entry[0] = GONE;
    if (entry === this.#lastEntry) this.#lastId = this.#lastEntry = undefined;
  }

  #set(id: string, state: typeof DONE, expiresAt: number, now: number): void {
    const held = this.#ids.get(id);
    if (held) this.#remove(id, held);
    this.#write(id, state, expiresAt, now);
  }

  /** Writes an id not in the Map, as its newest entry, then sweeps. */
  #write(id: string, state: typeof DONE | typeof CLAIMED, expiresAt: number, now: number): void {
    const entry: Entry = [state, expiresAt];
    this.#ids.set(id, entry);
    this.#lastId = id;
    this.#lastEntry = entry;
    this.#sweep(now);
  }

  /**
   * Sweeps a few of the oldest entries on each write: expired ones go, and past maxKeys the
   * oldest goes whether expired or not. Amortised O(1), no timer keeping the process alive.
   */
  #sweep(now: number): void {
    let swept = 0;
    for (let oldest = this.#oldest(); oldest; oldest = this.#oldest()) {
      if (this.#ids.size > this.#maxKeys || (oldest[1][1] <= now && swept < 4)) {
        this.#remove(oldest[0], oldest[1]);
        swept++;
      } else {
        break;
      }
    }
  }

  /** The entry written longest ago, or undefined when there is none. */
  #oldest(): [string, Entry] | undefined {
    for (;;) {
      // The entry last seen at the front, while it is still in the Map (a rewritten id was
      // re-inserted at the back, where the iterator will meet it again). Told by the entry itself,
      // not looked up: a lookup in a Map of 100,000 ids is a cache miss or more per write.
      if (this.#head && this.#head[1][0] !== GONE) return this.#head;
      this.#cursor ??= this.#ids.entries();
      const next = this.#cursor.next();
      if (next.done) {
        // A finished Map iterator stays finished: start a new one when entries come.
        this.#cursor = this.#head = undefined;
        return undefined;
      }
      this.#head = next.value;
    }
  }
}
