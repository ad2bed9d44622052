import type { FlagPositions } from "../../delivery/order/rule.js";
import { checkScope, claimToken, scopedKey } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore } from "../../store-contract/order-store.js";
import type { OrderCommand } from "./order-object.js";
import { type DedupeNamespace, fnv1a } from "./store.js";

/** Options of {@link DurableObjectOrderStore}. */
export interface DurableObjectOrderStoreOptions {
  /** The endpoint this store orders for (1 to 100 of `A-Z a-z 0-9 . _ -`), required. */
  scope: string;
  /**
   * How many objects the flags are spread over (1-1024, default 16): a flag lives in object
   * `<scope>:<n>`, n its key's FNV-1a hash modulo `shards`. Choose it once: changing it moves
   * flags to objects that have not seen their positions.
   */
  shards?: number;
  /** How long a flag's positions are kept after their last write, in ms (default 24 h). */
  retention?: number;
}

/**
 * Positions on Durable Objects (`OrderObject`), for receivers on Cloudflare Workers: every Worker
 * that uses the same namespace and `scope` shares them. Each flag lives in one object, which holds
 * it for one delivery at a time in its transactional storage; a delivery that finds the flag held
 * waits inside the object until the holder is done (no polling). Two requests to the object per
 * delivery: the hold (with the positions read), then the commit (the new positions written and
 * the hold ended at once) or the release. The handler's effects are not in the object: a Worker
 * that dies after them and before the commit leaves the event to run again on the sender's
 * retry, and a hold whose lease ran out is taken over (its late commit writes nothing).
 *
 * @example
 * ```ts
 * import { DurableObjectOrderStore, type DedupeNamespace } from "flag-webhooks/cloudflare";
 * import { webhookHandler } from "flag-webhooks/fetch";
 *
 * export default {
 *   fetch: (request: Request, env: { WEBHOOK_SECRET: string; ORDER: DedupeNamespace }) =>
 *     webhookHandler({
 *       secret: env.WEBHOOK_SECRET,
 *       maxAge: "5m",
 *       order: { store: new DurableObjectOrderStore(env.ORDER, { scope: "flag-mirror" }) },
 *       onEvent: (event) => console.log(event.type, event.id),
 *     })(request),
 * };
 * ```
 */
export class DurableObjectOrderStore implements OrderStore {
  readonly retention: number;
  readonly #namespace: DedupeNamespace;
  readonly #scope: string;
  readonly #shards: number;

  constructor(namespace: DedupeNamespace, options: DurableObjectOrderStoreOptions) {
    if (typeof namespace?.idFromName !== "function" || typeof namespace.get !== "function") {
      throw new TypeError("flag-webhooks: DurableObjectOrderStore needs a Durable Object namespace binding");
    }
    const { scope, shards = 16, retention = 86_400_000 } = options ?? ({} as DurableObjectOrderStoreOptions);
    this.#scope = checkScope(scope, "DurableObjectOrderStore");
    if (!Number.isInteger(shards) || shards < 1 || shards > 1024) {
      throw new TypeError(
        'flag-webhooks: DurableObjectOrderStore option "shards" must be a whole number from 1 to 1024',
      );
    }
    if (!Number.isSafeInteger(retention) || retention < 1) {
      throw new TypeError('flag-webhooks: option "retention" must be a positive whole number of ms');
    }
    this.#namespace = namespace;
    this.#shards = shards;
    this.retention = retention;
  }

  async hold(flag: string, lease: number, wait?: number): Promise<OrderHold> {
    const key = await scopedKey(this.#scope, flag);
    const token = claimToken();
    const command: OrderCommand = { op: "hold", key, token, ms: Math.ceil(lease) };
    if (wait !== undefined) command.wait = Math.max(0, Math.floor(wait));
    const text = (await this.#send(command)) as string | null | false;
    if (text === false) throw new Error(`flag-webhooks: flag ${JSON.stringify(flag)} stayed held past the wait`);
    let ended = false;
    return {
      positions: text === null ? undefined : (JSON.parse(text) as FlagPositions),
      commit: async (next) => {
        if (ended) throw new Error("flag-webhooks: this hold has ended");
        ended = true;
        const command: OrderCommand = { op: "commit", key, token, ms: this.retention };
        if (next) command.positions = JSON.stringify(next);
        let answer: unknown;
        try {
          answer = await this.#send(command);
        } catch (error) {
          // The object could not write (a record past its largest value, storage failing): the
          // hold is still there. End it, if still this one's, so the flag's next delivery need
          // not wait out the lease.
          await this.#send({ op: "release", key, token, ms: 0 }).catch(() => undefined);
          throw error;
        }
        if (answer !== "ok") {
          throw new Error(`flag-webhooks: the hold on flag ${JSON.stringify(flag)} ran out`);
        }
      },
      release: async () => {
        if (ended) return;
        ended = true;
        await this.#send({ op: "release", key, token, ms: 0 }).catch(() => undefined);
      },
    };
  }

  async #send(command: OrderCommand): Promise<unknown> {
    const name = `${this.#scope}:${fnv1a(command.key) % this.#shards}`;
    const stub = this.#namespace.get(this.#namespace.idFromName(name) as never);
    const response = await stub.fetch("https://order-object/", { method: "POST", body: JSON.stringify(command) });
    if (response.status !== 200) throw new Error(`flag-webhooks: the OrderObject answered ${response.status}`);
    const { result } = (await response.json()) as { result: unknown };
    if (command.op === "hold" && result !== null && result !== false && typeof result !== "string") {
      throw new Error("flag-webhooks: the OrderObject answered a hold with no positions");
    }
    return result;
  }
}
