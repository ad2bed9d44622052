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
  /** How long the caller waits for the hold, in ms (hold; absent: as long as it takes). */
  wait?: number;
}

/**
 * A flag's record: its positions until `expiresAt` (in the record, or in `parts` keys of their
 * own when too long for one value), and the hold on it, if any, until `leaseEnds` (ms).
 */
interface Entry {
  positions?: string;
  parts?: number;
  expiresAt: number;
  holder?: string;
  leaseEnds?: number;
}

const FLAG = "flag:";
const PART = "part:";
// A storage value holds at most about 2 MB (SQLITE_TOOBIG past it), and a string may take 2 bytes
// a character: positions longer than this are split over keys of this many characters each.
const PART_CHARS = 262_144;
// One put writes at most 128 keys atomically: the record and up to 127 parts (about 33 M characters).
const MOST_PARTS = 127;
// Storage lists at most this many keys a page, so the alarm's sweep of a large object is paged.
const PAGE = 512;
// The alarm sweeps every record of the object: never sooner than this after the last sweep.
const SWEEP_EVERY = 60_000;

/**
 * The Durable Object that keeps the positions of ordered delivery for
 * {@link DurableObjectOrderStore}: re-export it from your Worker and bind it (a `durable_objects`
 * binding, `class_name = "OrderObject"`, and a migration with `new_sqlite_classes =
 * ["OrderObject"]`). Each flag's positions and the hold on it are one record of the object's
 * transactional storage (positions too long for one value in parts beside it), the hold persisted (so a restart of the object does not forget it). A
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
        if (until <= now) gone.push(key, ...partKeys(key.slice(FLAG.length), entry.parts));
        else next = Math.min(next, until);
      }
      for (let i = 0; i < gone.length; i += 128) await this.#storage.delete(gone.slice(i, i + 128));
      if (page.size < PAGE) break;
      after = [...page.keys()].at(-1);
    }
    if (next !== Number.POSITIVE_INFINITY) await this.#storage.setAlarm(Math.max(next, now + SWEEP_EVERY));
  }

  /**
   * Takes the flag for `token` once no live hold is there, and answers its positions (null when
   * none); `false`, taking nothing, once the caller's `wait` has passed: in a deployed Worker a
   * caller that gave up has answered and is gone, and a hold taken for it would keep the flag from
   * every delivery for a whole lease, with no one left to release it.
   */
  async #hold({ key, token, ms, wait }: OrderCommand): Promise<string | null | false> {
    const until = wait === undefined ? Number.POSITIVE_INFINITY : Date.now() + wait;
    for (let turns = 0; ; turns++) {
      const { waited, taken } = await this.#serially(async () => {
        const entry = await this.#storage.get<Entry>(FLAG + key);
        const now = Date.now();
        const held = entry?.holder !== undefined && (entry.leaseEnds ?? 0) > now;
        // Past the wait its caller has given up, held or not (a free flag found only after waiting).
        if (now >= until && (held || turns > 0)) return { waited: undefined, taken: false as const };
        if (held) {
          // Waiting from now, in this turn: the holder's end, which comes after, cannot be missed.
          const left = Math.min(entry.leaseEnds ?? now, until) - now;
          return { waited: this.#wait(key, left), taken: undefined };
        }
        const live = entry && entry.expiresAt > now ? await this.#positions(key, entry) : undefined;
        const hold = { holder: token, leaseEnds: now + ms };
        // A flag with no positions yet keeps its record for the lease only; its parts stay as they are.
        if (live === undefined) await this.#write(key, entry, { expiresAt: now + ms, ...hold });
        else await this.#put(key, { ...(entry as Entry), ...hold });
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
      const { holder: _, leaseEnds: __, ...kept } = entry;
      if (op === "commit" && positions !== undefined) {
        await this.#write(key, entry, { expiresAt: Date.now() + ms }, positions);
      } else if (kept.positions === undefined && kept.parts === undefined) {
        await this.#storage.delete([FLAG + key]);
      } else await this.#put(key, kept);
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

  /** A record's positions: its own, or its parts' joined. */
  async #positions(key: string, entry: Entry): Promise<string | undefined> {
    if (entry.parts === undefined) return entry.positions;
    const parts = await this.#storage.get<string>(partKeys(key, entry.parts));
    return partKeys(key, entry.parts)
      .map((part) => parts.get(part) ?? "")
      .join("");
  }

  /**
   * Writes `key`'s record as `entry` with `positions` (none when absent), split over parts when
   * too long for one value, in one put, which storage makes atomic; the parts of `old` no longer
   * used are deleted. Positions past what one put can write are refused, naming the limit.
   */
  async #write(key: string, old: Entry | undefined, entry: Entry, positions = ""): Promise<void> {
    const record: Record<string, unknown> = { [FLAG + key]: entry };
    const count = Math.ceil(positions.length / PART_CHARS);
    if (count > MOST_PARTS)
      throw new Error(`flag-webhooks: a flag's positions are over ${MOST_PARTS * PART_CHARS} chars`);
    if (count > 1) {
      entry.parts = count;
      for (const [i, part] of partKeys(key, count).entries())
        record[part] = positions.substr(i * PART_CHARS, PART_CHARS);
    } else if (positions) entry.positions = positions;
    await this.#storage.put(record);
    const stale = partKeys(key, old?.parts).slice(count > 1 ? count : 0);
    if (stale.length > 0) await this.#storage.delete(stale);
    await this.#alarmFor(entry);
  }

  /** Writes a record whose positions (or parts) are unchanged. */
  async #put(key: string, entry: Entry): Promise<void> {
    await this.#storage.put({ [FLAG + key]: entry });
    await this.#alarmFor(entry);
  }

  async #alarmFor(entry: Entry): Promise<void> {
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

/** The keys of a record's `parts` parts (none when it has none). */
function partKeys(key: string, parts = 0): string[] {
  return Array.from({ length: parts }, (_, i) => `${PART}${key}:${i}`);
}

/** The command a request's JSON holds; undefined when it is none. */
function commandOf(value: unknown): OrderCommand | undefined {
  const { op, key, token, ms, positions, wait } = (value ?? {}) as Partial<OrderCommand>;
  if (
    (op === "hold" || op === "commit" || op === "release") &&
    typeof key === "string" &&
    key !== "" &&
    typeof token === "string" &&
    token !== "" &&
    isFiniteNumber(ms) &&
    ms >= 0 &&
    (positions === undefined || typeof positions === "string") &&
    (wait === undefined || (isFiniteNumber(wait) && wait >= 0))
  ) {
    return { op, key, token, ms, positions, wait };
  }
  return undefined;
}
