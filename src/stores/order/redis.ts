// Ordered delivery's positions on Redis: one key of JSON per flag, and a lock key per flag that
// one delivery holds from before its handler runs until it is decided. Each step is one script,
// so the lock and the positions change together, atomically, on the server; with a
// RedisDedupeStore on the same client the hold is taken in the claim's own script.
import type { FlagPositions } from "../../delivery/order/rule.js";
import type { DedupeStore } from "../../store-contract/dedupe-store.js";
import { checkScope, claimToken } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore, PairedClaim } from "../../store-contract/order-store.js";
import { type RedisClientLike, scriptedClaim } from "../redis.js";
import { Turns } from "./turns.js";

/** Options of {@link RedisOrderStore}. */
export interface RedisOrderStoreOptions {
  /** The endpoint this store orders for (1 to 100 of `A-Z a-z 0-9 . _ -`), required, as for RedisDedupeStore. */
  scope: string;
  /** Prepended to every key, before the scope. Default `"flag-webhooks:order:"`. */
  prefix?: string;
  /** How long a flag's positions are kept after their last write, in ms (default 24 h). */
  retention?: number;
}

// KEYS: lock, positions. ARGV: token, lease. The lock taken and the positions read at once, or
// the lock's time left while another delivery holds the flag. A hold sent again (its answer lost)
// finds its own token and holds.
const HOLD =
  'local l = redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2], "GET") if l and l ~= ARGV[1] then return {0, redis.call("PTTL", KEYS[1])} end return {1, redis.call("GET", KEYS[2]) or ""}';
// KEYS: claim, lock, positions. ARGV: claim value, claim PX, token, lease. The dedupe claim's SET
// NX GET (the value the id held first, "" for none), then, if this claimed it, HOLD's lock.
const CLAIM_AND_HOLD =
  'local p = redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2], "NX", "GET") if p and p ~= ARGV[1] then return {p, 0, ""} end local l = redis.call("SET", KEYS[2], ARGV[3], "NX", "PX", ARGV[4], "GET") if l and l ~= ARGV[3] then return {p or "", 0, ""} end return {p or "", 1, redis.call("GET", KEYS[3]) or ""}';
// KEYS: lock, positions. ARGV: token, positions ("" to write none), retention. Written only by the
// delivery still holding the lock; 0 when its lease ran out.
const COMMIT =
  'if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end if ARGV[2] ~= "" then redis.call("SET", KEYS[2], ARGV[2], "PX", ARGV[3]) end redis.call("DEL", KEYS[1]) return 1';
const RELEASE = 'if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) end return 1';

/**
 * Positions on Redis (7.0 or later) through your own ioredis or node-redis client, for several
 * instances of one endpoint. Deliveries of one flag take turns across every instance: a lock per
 * flag, taken with the positions read in one script and given back with the new positions written
 * in another (two round trips per delivery; with a RedisDedupeStore on the same client the lock is
 * taken in the claim's script, so `order` adds one; two on a Redis Cluster, where a flag's keys share
 * a slot, by a hash tag, but not the event's). A delivery that finds the flag held is woken
 * at once when a delivery of this process ends its hold; a hold of another instance is looked at
 * again after a pause that doubles from 10 ms to 250 ms, never past its lease, within the
 * receiver's `order.timeout`. The handler's effects are not in Redis: a process that dies after
 * them and before the commit leaves the event to run again on the sender's retry, and a lock whose
 * lease ran out is taken over (its late commit writes nothing).
 *
 * @example
 * ```ts
 * webhookHandler({ secret, maxAge: "5m", order: { store: new RedisOrderStore(redis, { scope: "audit-app" }) }, onEvent });
 * ```
 */
export class RedisOrderStore implements OrderStore {
  readonly retention: number;
  readonly #client: RedisClientLike;
  readonly #call: (args: string[]) => Promise<unknown>;
  readonly #prefix: string;
  readonly #turns = new Turns();

  constructor(client: RedisClientLike, options: RedisOrderStoreOptions) {
    const scope = checkScope(options?.scope, "RedisOrderStore");
    this.#prefix = `${options.prefix ?? "flag-webhooks:order:"}${scope}:`;
    this.retention = options.retention ?? 86_400_000;
    if (!Number.isSafeInteger(this.retention) || this.retention < 1) {
      throw new TypeError('flag-webhooks: option "retention" must be a positive whole number of ms');
    }
    this.#client = client;
    this.#call =
      "call" in client
        ? (args) => client.call(args[0] as string, ...args.slice(1))
        : (args) => client.sendCommand(args);
  }

  async hold(flag: string, lease: number): Promise<OrderHold> {
    const keys = this.#keys(flag);
    const token = claimToken();
    const text = await this.#turns.take<string>(flag, async () => {
      const [held, found] = (await this.#call(["EVAL", HOLD, "2", ...keys, token, String(lease)])) as [number, unknown];
      return held === 1 ? { hold: String(found) } : { left: Number(found) };
    });
    return this.#held(flag, keys, token, text);
  }

  /**
   * With a RedisDedupeStore on this client: its claim and this hold in one script. Not on a Redis
   * Cluster (ioredis's `Cluster`): the event's id key and the flag's keys fall in different hash
   * slots, which one script cannot touch there, so the claim and the hold are two requests.
   */
  pairedClaim(dedupe: DedupeStore): ReturnType<NonNullable<OrderStore["pairedClaim"]>> {
    const claim = scriptedClaim(dedupe);
    if (claim?.client !== this.#client || (this.#client as { isCluster?: unknown }).isCluster === true) {
      return undefined;
    }
    return async (id, claimLease, flag, holdLease) => {
      const keys = this.#keys(flag);
      const token = claimToken();
      let reply: unknown;
      let result: Awaited<ReturnType<PairedClaim>>["claim"];
      try {
        ({ result, reply } = await claim.claim(id, claimLease, (key, value, px) => {
          return ["EVAL", CLAIM_AND_HOLD, "3", key, ...keys, value, px, token, String(holdLease)];
        }));
      } catch (error) {
        // It may have landed, lock and all: the lock is then this failed claim's, for nobody.
        void this.#call(["EVAL", RELEASE, "1", keys[0], token]).catch(() => {});
        throw error;
      }
      const [, held, text] = reply as [unknown, number, string];
      if (result !== "claimed" || held !== 1) return { claim: result, hold: undefined };
      this.#turns.taken(flag);
      return { claim: result, hold: this.#held(flag, keys, token, text) };
    };
  }

  /**
   * The flag's lock and positions, the same up to the flag in braces: a hash tag, so that on a
   * Redis Cluster both are in one slot and a script may touch them together. (Whatever braces the
   * prefix or the flag hold, Redis hashes the text from the first `{` to the first `}` after it,
   * which both keys share, unless the prefix holds an empty `{}`.)
   */
  #keys(flag: string): [lock: string, positions: string] {
    return [`${this.#prefix}{${flag}}:lock`, `${this.#prefix}{${flag}}:flag`];
  }

  /** The hold `token` took on `flag`, which found `text` ("" for no positions). */
  #held(flag: string, keys: [string, string], token: string, text: string): OrderHold {
    let ended = false;
    const end = () => {
      if (ended) return false;
      ended = true;
      this.#turns.ended(flag);
      return true;
    };
    return {
      positions: text === "" ? undefined : (JSON.parse(text) as FlagPositions),
      commit: async (next) => {
        const args = ["EVAL", COMMIT, "2", ...keys, token, next ? JSON.stringify(next) : "", String(this.retention)];
        try {
          if ((await this.#call(args)) !== 1) {
            throw new Error(`flag-webhooks: the hold on flag ${JSON.stringify(flag)} ran out`);
          }
        } finally {
          end();
        }
      },
      release: async () => {
        await this.#call(["EVAL", RELEASE, "1", keys[0], token]).catch(() => undefined);
        end();
      },
    };
  }
}
