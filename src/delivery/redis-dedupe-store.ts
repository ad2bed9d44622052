import type { ClaimResult, DedupeStore } from "./dedupe.js";

/**
 * The part of a Redis client the store uses: ioredis (v5, v6) has `call`, node-redis (v4 and
 * later) has `sendCommand`. Either is enough; the client, its connection and its options stay the
 * user's, and flag-webhooks depends on neither package.
 */
export type RedisClientLike =
  | { call(command: string, ...args: string[]): Promise<unknown> }
  | { sendCommand(args: string[]): Promise<unknown> };

/** Options of {@link RedisDedupeStore}. */
export interface RedisDedupeStoreOptions {
  /** Prepended to every key, so several apps can share one Redis. Default `"flag-webhooks:dedupe:"`. */
  prefix?: string;
}

const DONE = "done";
// Deletes the key only while it still holds this process's claim: after a lease expired, another
// instance may hold the id, and its claim must survive our release.
const RELEASE = 'if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0';

/**
 * A dedupe store on Redis, shared by every receiver instance that uses the same server and prefix.
 * A claim is one atomic `SET key token NX PX lease GET`: of two instances that get the same
 * delivery at the same moment, one runs the handler. Marking it done is one `SET key done PX ttl`;
 * a duplicate costs the one claim. Needs Redis 7.0 or later (`SET` with both `NX` and `GET`).
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis"; // or: createClient() from "redis", then await client.connect()
 * const store = new RedisDedupeStore(new Redis(process.env.REDIS_URL!));
 * app.post("/webhooks", webhookMiddleware({ secret, dedupe: { store, ttl: 86_400_000 }, onEvent }));
 * ```
 */
export class RedisDedupeStore implements DedupeStore {
  readonly #send: (args: string[]) => Promise<unknown>;
  readonly #prefix: string;
  // The value of this store's claims: release() deletes a key only while it holds this value, so
  // it never frees another instance's claim. Per store, not per claim, so nothing is kept per id;
  // within one process the receiver releases a claim only while its lease lasts.
  readonly #token = `claim.${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;

  constructor(client: RedisClientLike, options: RedisDedupeStoreOptions = {}) {
    if (client && typeof (client as { call?: unknown }).call === "function") {
      const ioredis = client as { call(command: string, ...args: string[]): Promise<unknown> };
      this.#send = ([command, ...args]) => ioredis.call(command as string, ...args);
    } else if (client && typeof (client as { sendCommand?: unknown }).sendCommand === "function") {
      const nodeRedis = client as { sendCommand(args: string[]): Promise<unknown> };
      this.#send = (args) => nodeRedis.sendCommand(args);
    } else {
      throw new TypeError("flag-webhooks: RedisDedupeStore needs an ioredis or node-redis client");
    }
    this.#prefix = options.prefix ?? "flag-webhooks:dedupe:";
  }

  async claim(id: string, lease: number): Promise<ClaimResult> {
    const previous = await this.#send(["SET", this.#prefix + id, this.#token, "PX", ms(lease), "NX", "GET"]);
    if (previous === null || previous === undefined) return "claimed";
    return String(previous) === DONE ? "done" : "in_flight";
  }

  async complete(id: string, ttl: number): Promise<void> {
    await this.#send(["SET", this.#prefix + id, DONE, "PX", ms(ttl)]);
  }

  async release(id: string): Promise<void> {
    await this.#send(["EVAL", RELEASE, "1", this.#prefix + id, this.#token]);
  }
}

/** PX takes a whole, positive number of milliseconds. */
function ms(value: number): string {
  return String(Math.max(1, Math.ceil(value)));
}
