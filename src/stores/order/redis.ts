// Ordered delivery's positions on Redis: one key of JSON per flag, and a lock key per flag that
// one delivery holds from before its handler runs until it is decided. Each step is one script,
// so the lock and the positions change together, atomically, on the server.
import type { FlagPositions } from "../../delivery/order/rule.js";
import { checkScope, claimToken } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore } from "../../store-contract/order-store.js";
import type { RedisClientLike } from "../redis.js";

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
// false while another delivery holds the flag.
const HOLD =
  'if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return {1, redis.call("GET", KEYS[2]) or ""} end return {0, ""}';
// KEYS: lock, positions. ARGV: token, positions ("" to write none), retention. Written only by the
// delivery still holding the lock; 0 when its lease ran out.
const COMMIT =
  'if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end if ARGV[2] ~= "" then redis.call("SET", KEYS[2], ARGV[2], "PX", ARGV[3]) end redis.call("DEL", KEYS[1]) return 1';
const RELEASE = 'if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) end return 1';

/**
 * Positions on Redis (7.0 or later) through your own ioredis or node-redis client, for several
 * instances of one endpoint. Deliveries of one flag take turns across every instance: a lock per
 * flag, taken with the positions read in one script and given back with the new positions written
 * in another (two round trips per delivery); a delivery that finds the flag held polls every 10 ms
 * until the receiver's `order.timeout`. The handler's effects are not in Redis: a process that
 * dies after them and before the commit leaves the event to run again on the sender's retry, and
 * a lock whose lease ran out is taken over (its late commit writes nothing).
 *
 * @example
 * ```ts
 * webhookHandler({ secret, maxAge: "5m", order: { store: new RedisOrderStore(redis, { scope: "audit-app" }) }, onEvent });
 * ```
 */
export class RedisOrderStore implements OrderStore {
  readonly retention: number;
  readonly #call: (args: string[]) => Promise<unknown>;
  readonly #prefix: string;

  constructor(client: RedisClientLike, options: RedisOrderStoreOptions) {
    const scope = checkScope(options?.scope, "RedisOrderStore");
    this.#prefix = `${options.prefix ?? "flag-webhooks:order:"}${scope}:`;
    this.retention = options.retention ?? 86_400_000;
    if (!Number.isSafeInteger(this.retention) || this.retention < 1) {
      throw new TypeError('flag-webhooks: option "retention" must be a positive whole number of ms');
    }
    this.#call =
      "call" in client
        ? (args) => client.call(args[0] as string, ...args.slice(1))
        : (args) => client.sendCommand(args);
  }

  async hold(flag: string, lease: number): Promise<OrderHold> {
    const keys = [`${this.#prefix}lock:${flag}`, `${this.#prefix}flag:${flag}`];
    const token = claimToken();
    for (;;) {
      const [held, text] = (await this.#call(["EVAL", HOLD, "2", ...keys, token, String(lease)])) as [number, string];
      if (held === 1) {
        const positions = text === "" ? undefined : (JSON.parse(text) as FlagPositions);
        return {
          positions,
          commit: async (next) => {
            const args = [
              "EVAL",
              COMMIT,
              "2",
              ...keys,
              token,
              next ? JSON.stringify(next) : "",
              String(this.retention),
            ];
            if ((await this.#call(args)) !== 1)
              throw new Error(`flag-webhooks: the hold on flag ${JSON.stringify(flag)} ran out`);
          },
          release: async () => {
            await this.#call(["EVAL", RELEASE, "1", keys[0] as string, token]).catch(() => undefined);
          },
        };
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}
