/** What a store says when a delivery tries to claim its event id. */
export type ClaimResult = "claimed" | "in_flight" | "done";

/**
 * Where a receiver remembers the event ids it has handled, so a repeated delivery runs the handler
 * once. Three operations; each must be atomic for the id it names. {@link MemoryDedupeStore} and
 * {@link RedisDedupeStore} implement it; a store of your own (a SQL table with a unique key, say)
 * can too.
 *
 * @example
 * ```ts
 * const store: DedupeStore = new MemoryDedupeStore({ maxKeys: 50_000 });
 * webhookHandler({ secret, dedupe: { store, ttl: 24 * 60 * 60 * 1000 }, onEvent });
 * ```
 */
export interface DedupeStore {
  /**
   * Claims `id` for a delivery about to run the handler, for at most `lease` ms (so a crashed
   * process cannot hold it for ever): `"claimed"` if it was free, `"in_flight"` if another
   * delivery holds it, `"done"` if it was handled within its ttl.
   */
  claim(id: string, lease: number): ClaimResult | Promise<ClaimResult>;
  /** Marks `id` handled; it stays `"done"` for `ttl` ms. */
  complete(id: string, ttl: number): void | Promise<void>;
  /**
   * Frees this process's claim on `id` after the handler failed, so the sender's retry runs it.
   * The receiver calls it only while the claim's lease lasts; it must never free another
   * instance's claim (see {@link RedisDedupeStore}) nor undo a completed id.
   */
  release(id: string): void | Promise<void>;
}
