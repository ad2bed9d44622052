import { isFiniteNumber } from "../../util/finite.js";
import type { DedupeObjectState, DedupeObjectStorage } from "./object.js";

/** One request from {@link DurableObjectOrderStore} to its object. */
export interface OrderCommand {
  op: "hold" | "commit" | "release";
  /** The flag's key under the store's scope. */
  key: string;
  /** This hold's token: only the hold that holds the flag commits or releases it. */
  token: string;
  /** The lease (hold) or the positions' retention (commit), in ms. */
  ms: number;
  /** The new positions, as JSON (commit; absent to write none). */
  positions?: string;
}

/** A flag's record: its positions until `expiresAt`, and the hold on it, if any, until `leaseEnds` (ms). */
interface Entry {
  positions?: string;
  expiresAt: number;
  holder?: string;
  leaseEnds?: number;
}

const FLAG = "flag:";
// Storage lists at most this many keys a page, so the alarm's sweep of a large object is paged.
const PAGE = 512;
// The alarm sweeps every record of the object: never sooner than this after the last sweep.
const SWEEP_EVERY = 60_000;

/**
 * The Durable Object that keeps the positions of ordered delivery for
 * {@link DurableObjectOrderStore}: re-export it from your Worker and bind it (a `durable_objects`
 * binding, `class_name = "OrderObject"`, and a migration with `new_sqlite_classes =
 * ["OrderObject"]`). Each flag's positions and the hold on it are one record of the object's
 * transactional storage, the hold persisted (so a restart of the object does not forget it). A
 * hold is a read then a write with no other I/O between, which the object's input gate makes
 * atomic; a hold that finds the flag held waits in the object, without polling, until the holder
 * commits or releases or its lease runs out. Records expire a retention after their last write,
 * deleted by an alarm.
 *
 * @example
 * ```ts
 * import { OrderObject } from "flag-webhooks/cloudflare";
 * export { OrderObject }; // wrangler.toml: [[durable_objects.bindings]] name = "ORDER", class_name = "OrderObject"
 * ```
 */
export class OrderObject {
  /** The runtime types' mark of a Durable Object class, as on {@link DedupeObject}. */
  declare readonly __DURABLE_OBJECT_BRAND: never;
  readonly #storage: DedupeObjectStorage;
  /** The holds waiting here for a flag, woken when its hold ends. */
  readonly #waiting = new Map<string, Set<() => void>>();
  /** The read-then-write now running, which the next one waits for. */
  #turn: Promise<unknown> = Promise.resolve();

  constructor(state: DedupeObjectState, _env?: unknown) {
    this.#storage = state.storage;
  }

  /** Serves {@link DurableObjectOrderStore}'s requests: `POST` a JSON {@link OrderCommand}. */
  async fetch(request: Request): Promise<Response> {
    const command = commandOf(await request.json().catch(() => undefined));
    if (!command) return Response.json({ error: "not an order command" }, { status: 400 });
    if (command.op === "hold") return Response.json({ result: await this.#hold(command) });
    return Response.json({ result: await this.#end(command) });
  }

  /** Deletes the records past their expiry and not held, and sets the alarm for the next one. */
  async alarm(): Promise<void> {
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    let after: string | undefined;
    for (;;) {
      const page = await this.#storage.list<Entry>({ prefix: FLAG, limit: PAGE, ...(after && { startAfter: after }) });
      const gone: string[] = [];
      for (const [key, entry] of page) {
        const until = Math.max(entry.expiresAt, entry.holder ? (entry.leaseEnds ?? 0) : 0);
        if (until <= now) gone.push(key);
        else next = Math.min(next, until);
      }
      if (gone.length > 0) await this.#storage.delete(gone);
      if (page.size < PAGE) break;
      after = [...page.keys()].at(-1);
    }
    if (next !== Number.POSITIVE_INFINITY) await this.#storage.setAlarm(Math.max(next, now + SWEEP_EVERY));
  }

  /** Takes the flag for `token` once no live hold is there, and answers its positions (null when none). */
  async #hold({ key, token, ms }: OrderCommand): Promise<string | null> {
    for (;;) {
      const { waited, taken } = await this.#serially(async () => {
        const entry = await this.#storage.get<Entry>(FLAG + key);
        const now = Date.now();
        if (entry?.holder !== undefined && (entry.leaseEnds ?? 0) > now) {
          // Waiting from now, in this turn: the holder's end, which comes after, cannot be missed.
          return { waited: this.#wait(key, (entry.leaseEnds ?? now) - now), taken: undefined };
        }
        const live = entry && entry.expiresAt > now ? entry.positions : undefined;
        // A flag with no positions yet keeps its record for the lease only.
        const expiresAt = live === undefined ? now + ms : (entry?.expiresAt ?? now);
        await this.#write(key, {
          ...(live !== undefined && { positions: live }),
          expiresAt,
          holder: token,
          leaseEnds: now + ms,
        });
        return { waited: undefined, taken: live ?? null };
      });
      if (taken !== undefined) return taken;
      await waited;
    }
  }

  /** Commits (the new positions written, if any) or releases `token`'s hold; "lapsed" when it is no longer the holder. */
  #end({ op, key, token, ms, positions }: OrderCommand): Promise<"ok" | "lapsed"> {
    return this.#serially(async () => {
      const entry = await this.#storage.get<Entry>(FLAG + key);
      if (entry?.holder !== token) return op === "commit" ? "lapsed" : "ok";
      const written = op === "commit" && positions !== undefined;
      const kept = written ? positions : entry.positions;
      if (kept === undefined) await this.#storage.delete(FLAG + key);
      else await this.#write(key, { positions: kept, expiresAt: written ? Date.now() + ms : entry.expiresAt });
      this.#wake(key);
      return "ok";
    });
  }

  /**
   * Runs one read-then-write of a record after the ones before it have ended. The input gate keeps
   * new requests out while storage is read, but not the requests already running here (holds woken
   * together), which would otherwise each read the flag free and each take it.
   */
  #serially<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(step);
    this.#turn = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  async #write(key: string, entry: Entry): Promise<void> {
    await this.#storage.put({ [FLAG + key]: entry });
    if ((await this.#storage.getAlarm()) === null) await this.#storage.setAlarm(entry.expiresAt);
  }

  /** Waits until a hold of `key` ends here, or at most `ms` (when its lease runs out). */
  #wait(key: string, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let waiting = this.#waiting.get(key);
      if (!waiting) {
        waiting = new Set();
        this.#waiting.set(key, waiting);
      }
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(
        () => {
          this.#waiting.get(key)?.delete(wake);
          resolve();
        },
        Math.max(1, ms),
      );
      waiting.add(wake);
    });
  }

  #wake(key: string): void {
    const waiting = this.#waiting.get(key);
    this.#waiting.delete(key);
    for (const wake of waiting ?? []) wake();
  }
}

/** The command a request's JSON holds; undefined when it is none. */
function commandOf(value: unknown): OrderCommand | undefined {
  const { op, key, token, ms, positions } = (value ?? {}) as Partial<OrderCommand>;
  if (
    (op === "hold" || op === "commit" || op === "release") &&
    typeof key === "string" &&
    key !== "" &&
    typeof token === "string" &&
    token !== "" &&
    isFiniteNumber(ms) &&
    ms >= 0 &&
    (positions === undefined || typeof positions === "string")
  ) {
    return positions === undefined ? { op, key, token, ms } : { op, key, token, ms, positions };
  }
  return undefined;
}
