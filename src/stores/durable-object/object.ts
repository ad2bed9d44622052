import type { ClaimResult } from "../../store-contract/dedupe-store.js";
import { isFiniteNumber } from "../../util/finite.js";

// Structural types of the Workers runtime objects the object uses, so the package needs no
// @cloudflare/workers-types at run time: the runtime's DurableObjectState is assignable to them
// (checked in test/cloudflare.test-d.ts against @cloudflare/workers-types).

/** The part of a Durable Object's transactional storage {@link DedupeObject} and `OrderObject` use. */
export interface DedupeObjectStorage {
  get<T = unknown>(key: string): Promise<T | undefined>;
  get<T = unknown>(keys: string[]): Promise<Map<string, T>>;
  list<T = unknown>(options: {
    prefix?: string;
    startAfter?: string;
    end?: string;
    limit?: number;
  }): Promise<Map<string, T>>;
  put<T>(entries: Record<string, T>): Promise<void>;
  delete(key: string): Promise<boolean>;
  delete(keys: string[]): Promise<number>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number): Promise<void>;
}

/** The part of `DurableObjectState` {@link DedupeObject} uses: its storage. */
export interface DedupeObjectState {
  readonly storage: DedupeObjectStorage;
}

/** One request from {@link DurableObjectDedupeStore} to its object. */
export interface DedupeCommand {
  op: "claim" | "complete" | "release";
  key: string;
  /** The lease (claim) or ttl (complete), in ms. */
  ms: number;
  /** The claiming store's token (claim, release). */
  token: string;
  /**
   * This one claim's own token (claim; release of a claim that failed): a claim sent again finds
   * its own record and is claimed, and such a release frees that claim and no other.
   */
  claim?: string;
}

/** An id's record: claimed by a token until `expiresAt`, or done until `expiresAt` (ms). */
interface Entry {
  state: "claimed" | "done";
  expiresAt: number;
  token?: string;
  claim?: string;
}

const ENTRY = "id:";
// Expiry index: `exp:<ms, 15 digits>:<entry key>`, so the alarm lists what is due in key order.
const INDEX = "exp:";
// Durable Object storage takes at most 128 keys per get or delete.
const BATCH = 128;
// Rounds per alarm; past them the alarm runs again at once rather than holding the object long.
const ROUNDS = 8;

const at = (ms: number) => `${INDEX}${String(Math.max(0, Math.ceil(ms))).padStart(15, "0")}`;

/**
 * The Durable Object that holds dedupe claims for {@link DurableObjectDedupeStore}: re-export it
 * from your Worker and bind it (wrangler: a `durable_objects` binding, `class_name =
 * "DedupeObject"`, and a migration with `new_sqlite_classes = ["DedupeObject"]`). Each id's record
 * lives in the object's transactional storage; a claim is a read then a write with no other I/O
 * between, which the object's input gate makes atomic (no other request to this object runs in
 * between). Records expire at their lease or ttl: a claim treats an expired record as absent, and
 * an alarm set at the earliest expiry deletes them, so storage does not grow without limit.
 *
 * @example
 * ```ts
 * import { DedupeObject } from "flag-webhooks/cloudflare";
 * export { DedupeObject }; // wrangler.toml: [[durable_objects.bindings]] name = "DEDUPE", class_name = "DedupeObject"
 * ```
 */
export class DedupeObject {
  /**
   * The runtime types' mark of a Durable Object class (`Rpc.DurableObjectBranded`, a string key
   * since @cloudflare/workers-types of June 2024), a type with no value: `wrangler types` declares
   * the binding as `DurableObjectNamespace<DedupeObject>`, which requires it.
   */
  declare readonly __DURABLE_OBJECT_BRAND: never;
  readonly #storage: DedupeObjectStorage;

  constructor(state: DedupeObjectState, _env?: unknown) {
    this.#storage = state.storage;
  }

  /** Serves {@link DurableObjectDedupeStore}'s requests: `POST` a JSON {@link DedupeCommand}. */
  async fetch(request: Request): Promise<Response> {
    const command = commandOf(await request.json().catch(() => undefined));
    if (!command) return Response.json({ error: "not a dedupe command" }, { status: 400 });
    return Response.json({ result: await this.#run(command) });
  }

  /** Deletes the records whose lease or ttl ran out, and sets the alarm for the next one. */
  async alarm(): Promise<void> {
    const now = Date.now();
    for (let round = 0; round < ROUNDS; round++) {
      const due = await this.#storage.list<string>({ prefix: INDEX, end: at(now + 1), limit: BATCH });
      if (due.size === 0) break;
      const held = await this.#storage.get<Entry>([...new Set(due.values())]);
      // A record written since has a later index key; its old one is deleted then, so one that is
      // due here names a record that expired (or was released), but check before deleting.
      const gone = [...held].filter(([, entry]) => entry.expiresAt <= now).map(([key]) => key);
      await this.#storage.delete([...due.keys()]);
      if (gone.length > 0) await this.#storage.delete(gone);
    }
    // Only exp: and id: keys are stored, and exp: sorts first: the first key of all is the next due.
    // Stryker disable next-line ObjectLiteral: listing every key finds the same first one
    const [next] = await this.#storage.list<string>({ prefix: INDEX, limit: 1 });
    if (next)
      await this.#storage.setAlarm(Math.max(Date.now(), Number(next[0].slice(INDEX.length, INDEX.length + 15))));
  }

  async #run({ op, key, ms, token, claim }: DedupeCommand): Promise<ClaimResult | "ok"> {
    const now = Date.now();
    const entryKey = ENTRY + key;
    // Only storage operations from here to the write: the input gate keeps other requests out.
    const held = await this.#storage.get<Entry>(entryKey);
    const live = held && held.expiresAt > now ? held : undefined;
    const ours = live?.state === "claimed" && (claim === undefined ? live.token === token : live.claim === claim);
    if (op === "claim") {
      // The same claim again (its first answer lost): it is this claim.
      if (live) return live.state === "done" ? "done" : ours && claim !== undefined ? "claimed" : "in_flight";
      await this.#write(entryKey, { state: "claimed", expiresAt: now + ms, token, ...(claim && { claim }) }, held);
      return "claimed";
    }
    if (op === "complete") {
      await this.#write(entryKey, { state: "done", expiresAt: now + ms }, held);
    } else if (live && ours) {
      // Never another store's claim (its lease lapsed and it was claimed again), never a done id.
      await this.#storage.delete([entryKey, indexKey(entryKey, live)]);
    }
    return "ok";
  }

  async #write(entryKey: string, entry: Entry, previous: Entry | undefined): Promise<void> {
    // Writes issued with no await between them are committed together (the object's write
    // coalescing): the record, its expiry index key, and the previous record's index key gone.
    const stale = previous ? this.#storage.delete(indexKey(entryKey, previous)) : undefined;
    const written = this.#storage.put<Entry | string>({ [entryKey]: entry, [indexKey(entryKey, entry)]: entryKey });
    // Awaited to fail the request with a failed write; the object's output gate would hold the answer anyway.
    // Stryker disable next-line ArrayDeclaration: unawaited, the output gate still holds and fails the answer
    await Promise.all([stale, written]);
    const alarm = await this.#storage.getAlarm();
    if (alarm === null || alarm > entry.expiresAt) await this.#storage.setAlarm(entry.expiresAt);
  }
}

/** The expiry index key of a record: its expiry, then its key, so the alarm finds what is due. */
function indexKey(entryKey: string, entry: Entry): string {
  return `${at(entry.expiresAt)}:${entryKey}`;
}

/** The command a request's JSON holds; undefined when it is none. */
function commandOf(value: unknown): DedupeCommand | undefined {
  const { op, key, ms, token, claim } = (value ?? {}) as Partial<DedupeCommand>;
  if (
    (claim === undefined || (typeof claim === "string" && claim !== "")) &&
    (op === "claim" || op === "complete" || op === "release") &&
    typeof key === "string" &&
    key !== "" &&
    typeof token === "string" &&
    isFiniteNumber(ms) &&
    ms >= 0
  ) {
    return claim === undefined ? { op, key, ms, token } : { op, key, ms, token, claim };
  }
  return undefined;
}
