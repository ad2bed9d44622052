import type { ClaimResult, DedupeStore } from "../../store-contract/dedupe-store.js";
import { checkScope, claimToken, scopedKey } from "../../store-contract/keys.js";
import type { DedupeCommand } from "./object.js";

/**
 * The part of a Durable Object namespace binding (`env.DEDUPE`) the store uses; the runtime's
 * `DurableObjectNamespace` is assignable to it.
 */
export interface DedupeNamespace {
  idFromName(name: string): unknown;
  get(id: never): {
    fetch(url: string, init: { method: string; body: string }): Promise<{ status: number; json(): Promise<unknown> }>;
  };
}

/** Options of {@link DurableObjectDedupeStore}. */
export interface DurableObjectDedupeStoreOptions {
  /**
   * Keeps endpoints that share the namespace apart (1-100 characters of `A-Za-z0-9._-`): every
   * Worker of one app uses the same scope and shares its ids; another scope never meets them.
   */
  scope: string;
  /**
   * How many objects the ids are spread over (1-1024, default 16): an id lives in object
   * `<scope>:<n>`, n its key's FNV-1a hash modulo `shards`. Choose it once: changing it moves
   * ids to other objects, which then forget the ids in flight and done until their ttl.
   */
  shards?: number;
}

/**
 * A dedupe store on Durable Objects (`DedupeObject`), for receivers on Cloudflare Workers:
 * every Worker, in every location, that uses the same namespace and `scope` shares one set of
 * ids. Strongly consistent per id: each id lives in exactly one object, which runs one request
 * at a time over its transactional storage. The ids are sharded over `shards` objects by hash, so
 * no single object carries every delivery. Keys are `scope#id`, a long or unusual id hashed
 * (`scope##<sha256>`, see docs/delivery.md). A delivery costs two requests to the object (claim,
 * complete), a duplicate one; a release deletes only this store's claim. Each claim carries a
 * token of its own: sent again after its answer was lost, it is claimed, not read as another's;
 * when its request fails, the store frees that claim, if it landed, and no other.
 *
 * @example
 * ```ts
 * import { DurableObjectDedupeStore, type DedupeNamespace } from "flag-webhooks/cloudflare";
 * import { webhookHandler } from "flag-webhooks/fetch";
 *
 * export default {
 *   fetch: (request: Request, env: { WEBHOOK_SECRET: string; DEDUPE: DedupeNamespace }) =>
 *     webhookHandler({
 *       secret: env.WEBHOOK_SECRET,
 *       dedupe: { store: new DurableObjectDedupeStore(env.DEDUPE, { scope: "flag-audit" }), ttl: "24h" },
 *       onEvent: (event) => console.log(event.type, event.id),
 *     })(request),
 * };
 * ```
 */
export class DurableObjectDedupeStore implements DedupeStore {
  readonly #namespace: DedupeNamespace;
  readonly #scope: string;
  readonly #shards: number;
  // As RedisDedupeStore's: release() frees only a claim this store made.
  readonly #token = claimToken();

  constructor(namespace: DedupeNamespace, options: DurableObjectDedupeStoreOptions) {
    if (typeof namespace?.idFromName !== "function" || typeof namespace.get !== "function") {
      throw new TypeError("flag-webhooks: DurableObjectDedupeStore needs a Durable Object namespace binding");
    }
    const { scope, shards = 16 } = options ?? ({} as DurableObjectDedupeStoreOptions);
    this.#scope = checkScope(scope, "DurableObjectDedupeStore");
    if (!Number.isInteger(shards) || shards < 1 || shards > 1024) {
      throw new TypeError(
        'flag-webhooks: DurableObjectDedupeStore option "shards" must be a whole number from 1 to 1024',
      );
    }
    this.#namespace = namespace;
    this.#shards = shards;
  }

  async claim(id: string, lease: number): Promise<ClaimResult> {
    // This claim's own token: sent again after its answer was lost, the object finds it its own.
    const claim = claimToken();
    try {
      return (await this.#send("claim", id, lease, claim)) as ClaimResult;
    } catch (error) {
      // It may have landed all the same (the object stored it, and its answer was lost): it holds
      // the id for nobody, so free it, this claim only, so the sender's retry is not kept waiting
      // for the lease.
      void this.#send("release", id, 0, claim).catch(() => {});
      throw error;
    }
  }

  async complete(id: string, ttl: number): Promise<void> {
    await this.#send("complete", id, ttl);
  }

  async release(id: string): Promise<void> {
    await this.#send("release", id, 0);
  }

  /** The object that holds `key`: `<scope>:<shard>`. */
  #objectName(key: string): string {
    return `${this.#scope}:${fnv1a(key) % this.#shards}`;
  }

  async #send(op: DedupeCommand["op"], id: string, ms: number, claim?: string): Promise<unknown> {
    const key = await scopedKey(this.#scope, id);
    const stub = this.#namespace.get(this.#namespace.idFromName(this.#objectName(key)) as never);
    const command: DedupeCommand = { op, key, ms: Math.ceil(ms), token: this.#token, ...(claim && { claim }) };
    const response = await stub.fetch("https://dedupe-object/", { method: "POST", body: JSON.stringify(command) });
    if (response.status !== 200) throw new Error(`flag-webhooks: the DedupeObject answered ${response.status}`);
    const { result } = (await response.json()) as { result: unknown };
    if (op === "claim" && result !== "claimed" && result !== "in_flight" && result !== "done") {
      throw new Error("flag-webhooks: the DedupeObject answered a claim with no result");
    }
    return result;
  }
}

/** FNV-1a, 32 bits, over UTF-16 code units: cheap, stable, and spread enough for sharding. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
