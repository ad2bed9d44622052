import { WebhookError } from "../errors.js";
import type { ClaimResult, DedupeStore } from "../store-contract/dedupe-store.js";
import { checkScope, claimToken, storedId } from "../store-contract/keys.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";
import { withTimeout } from "../util/timeout.js";

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
  /**
   * The endpoint this store dedupes for: 1 to 100 characters of `A-Z a-z 0-9 . _ -`, such as
   * `"audit-app"`. Required. The service sends one event, with one id, to every endpoint
   * subscribed to it: endpoints with different scopes never dedupe against each other, and the
   * instances of one app (one endpoint) use the same scope so that they share their ids.
   */
  scope: string;
  /** Prepended to every key, before the scope. Default `"flag-webhooks:dedupe:"`. */
  prefix?: string;
  /**
   * The longest wait for Redis to answer one call, in ms or as a duration such as `"2s"`; past
   * it the call rejects with `WebhookError("store_unavailable")` (503 if it reaches a receiver).
   * Default 2 s. It bounds calls made directly too (an idempotent worker's `claim`), which would
   * otherwise wait for as long as the client queues commands while Redis is unreachable.
   */
  timeout?: number | string;
}

const DONE = "done";
const DEFAULT_TIMEOUT = 2000;
// Deletes the key only while it holds a claim that starts with ARGV[1]: this store's (its token
// and a slash), or one claim's whole value. After a lease expired another instance may hold the id,
// and its claim must survive our release.
const RELEASE =
  'local v = redis.call("GET", KEYS[1]) if v and string.sub(v, 1, string.len(ARGV[1])) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0';

/**
 * A claim made inside a script of another store on the same client (RedisOrderStore's, which
 * takes the flag's hold in the same round trip): the claim's key, value and meaning stay this
 * file's. Internal, not exported by the package.
 */
export interface ScriptedClaim {
  readonly client: RedisClientLike;
  claim(
    id: string,
    lease: number,
    script: (key: string, value: string, px: string) => string[],
  ): Promise<{ result: ClaimResult; reply: unknown }>;
}

const scripted = new WeakMap<object, ScriptedClaim>();

/** The scripted claim of `store` when it is a RedisDedupeStore; undefined for any other store. */
export function scriptedClaim(store: unknown): ScriptedClaim | undefined {
  return typeof store === "object" && store !== null ? scripted.get(store) : undefined;
}

/**
 * A dedupe store on Redis, shared by every receiver instance that uses the same server, prefix
 * and `scope`. Keys are `<prefix><scope>:<event id>`, the id as every store keeps it (a long or
 * unusual id is hashed: `<prefix><scope>:#<sha256>`, see docs/delivery.md). A claim is one atomic
 * `SET key token NX PX lease GET`: of two instances that get the same delivery at the same
 * moment, one runs the handler. Each claim's token is its own, so a claim whose answer was lost
 * is recognised when the client sends it again (ioredis does), and freed when the client gives up
 * on it (node-redis does), rather than holding the id against the sender's retry for a lease. Marking it done is one `SET key done PX ttl`; a duplicate costs
 * the one claim. Every call rejects with `WebhookError("store_unavailable")` after `timeout`.
 * Needs Redis 7.0 or later (`SET` with both `NX` and `GET`).
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis"; // or: createClient() from "redis", then await client.connect()
 * const redis = new Redis(process.env.REDIS_URL!);
 * redis.on("error", (error) => console.warn("redis:", error.message)); // retried; calls answer 503 meanwhile
 * const store = new RedisDedupeStore(redis, { scope: "audit-app" });
 * app.post("/webhooks", webhookMiddleware({ secret, dedupe: { store, ttl: 86_400_000 }, onEvent }));
 * ```
 */
export class RedisDedupeStore implements DedupeStore {
  readonly #send: (args: string[]) => Promise<unknown>;
  readonly #prefix: string;
  readonly #timeout: number;
  // What this store's claims start with: release() deletes a key only while it holds a claim of
  // this store, so it never frees another instance's. Each claim adds a token of its own (so
  // nothing is kept per id): `<store token>/<claim token>/`. Within one process the receiver
  // releases a claim only while its lease lasts.
  readonly #token = `${claimToken()}/`;

  constructor(client: RedisClientLike, options: RedisDedupeStoreOptions) {
    if (client && typeof (client as { call?: unknown }).call === "function") {
      const ioredis = client as { call(command: string, ...args: string[]): Promise<unknown> };
      this.#send = ([command, ...args]) => ioredis.call(command as string, ...args);
    } else if (client && typeof (client as { sendCommand?: unknown }).sendCommand === "function") {
      const nodeRedis = client as { sendCommand(args: string[]): Promise<unknown> };
      this.#send = (args) => nodeRedis.sendCommand(args);
    } else {
      throw new TypeError("flag-webhooks: RedisDedupeStore needs an ioredis or node-redis client");
    }
    const { scope, prefix = "flag-webhooks:dedupe:", timeout } = options ?? ({} as RedisDedupeStoreOptions);
    this.#prefix = `${prefix}${checkScope(scope, "RedisDedupeStore")}:`;
    this.#timeout = timeout === undefined ? DEFAULT_TIMEOUT : parseDuration(timeout, "timeout", TIMER_MAX);
    scripted.set(this, { client, claim: (id, lease, script) => this.#claim(id, lease, script) });
  }

  async claim(id: string, lease: number): Promise<ClaimResult> {
    return (await this.#claim(id, lease)).result;
  }

  /**
   * Claims `id`: with one `SET NX GET`, or inside a script of another store on the same client
   * (`script` makes its EVAL; its reply's first element is the value the key held, "" for none).
   */
  async #claim(
    id: string,
    lease: number,
    script?: (key: string, value: string, px: string) => string[],
  ): Promise<{ result: ClaimResult; reply: unknown }> {
    const key = await this.#key(id);
    // This claim's own value. A SET whose answer was lost (the connection broke after Redis ran
    // it) is sent again by ioredis once it reconnects, and then reads this value back: the claim
    // is this one, not another delivery's.
    const value = `${this.#token}${claimToken()}/`;
    let reply: unknown;
    try {
      reply = await this.#call(
        script ? script(key, value, ms(lease)) : ["SET", key, value, "PX", ms(lease), "NX", "GET"],
      );
    } catch (error) {
      // It may have landed all the same (its answer lost, or later than the timeout): it holds the
      // id for nobody, so free it, that claim only, sent after the SET on the same connection, so
      // the retry is not kept waiting for the lease.
      void this.#call(["EVAL", RELEASE, "1", key, value]).catch(() => {});
      throw error;
    }
    const previous = script ? (reply as unknown[])[0] || null : reply;
    if (previous === null || previous === undefined || String(previous) === value) return { result: "claimed", reply };
    return { result: String(previous) === DONE ? "done" : "in_flight", reply };
  }

  async complete(id: string, ttl: number): Promise<void> {
    await this.#call(["SET", await this.#key(id), DONE, "PX", ms(ttl)]);
  }

  async release(id: string): Promise<void> {
    await this.#call(["EVAL", RELEASE, "1", await this.#key(id), this.#token]);
  }

  async #key(id: string): Promise<string> {
    return this.#prefix + (await storedId(id));
  }

  /**
   * One command, bounded by the timeout. The client's own error (a lost connection, a refused
   * command) rejects as it is; one that comes after the timeout changes nothing.
   */
  async #call(args: string[]): Promise<unknown> {
    const sent = this.#send(args); // in an async function: a client that throws rejects instead
    return withTimeout(
      sent,
      this.#timeout,
      () => new WebhookError("store_unavailable", `Redis did not answer within ${this.#timeout} ms`),
    );
  }
}

/** PX takes a whole, positive number of milliseconds. */
function ms(value: number): string {
  return String(Math.max(1, Math.ceil(value)));
}
