// Keep-then-work for one inbox (a scope in a table): the receiving side (enqueue), the worker,
// and looking and acting (pending, parked, kept, replay, purge). Driver-free: each inbox gives a
// KeepDatabase and the statements of its dialect; this decides everything else, once.
import type { WebhookEvent } from "../../events.js";
import { rawBodyOf, wantsRawBody } from "../../raw-body.js";
import { duplicateReply, inboxHandler } from "../../store-contract/enlist.js";
import { storedId } from "../../store-contract/keys.js";
import type { InboxTelemetry } from "../../telemetry.js";
import { parseDuration, TIMER_MAX } from "../../util/duration.js";
import { withTimeout } from "../../util/timeout.js";
import { inProgress, notKept, unavailable } from "../inbox-shell.js";
import type { TransactionOrder } from "../order/in-transaction.js";
import { type Ground, type Plan, take } from "./attempt.js";
import { countsOf } from "./counts.js";
import type { KeepDatabase, KeepRow } from "./database.js";
import { type Arrival, arrivalParams, Bound, type Found, GroupCommit, keepAll, keepNow } from "./group-commit.js";
import { scheduleOf } from "./schedule.js";
import type { KeepStatements } from "./statements.js";
import { type InboxState, received } from "./states.js";
import { tracedAttempt, traceToKeep } from "./traced.js";
import type {
  EnqueueOptions,
  InboxCounts,
  InboxWorker,
  KeepOptions,
  KeptEvent,
  KeptHandler,
  PurgeTarget,
  ReplayTarget,
  WorkOptions,
} from "./types.js";
import { Worker } from "./worker.js";

/** The most events one COMMIT of the receiving side keeps, by default (see EnqueueOptions.groupCommit). */
const GROUP_MOST = 64;

/** What an inbox tells keep-then-work of itself. */
export interface KeepSettings {
  /** "Postgres" or "SQLite", for messages. */
  name: string;
  scope: string;
  retention: number;
  /** The bound on each of the inbox's own steps, in ms. */
  timeout: number;
  /** The clock, in ms since the epoch. */
  now: () => number;
  /** The inbox's `order`: each attempt runs with what is fresh of its event, ordered in its transaction. */
  order?: TransactionOrder | undefined;
}

const LIST_LIMIT = 100;
const exact = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** What `#met` answers for an expired row kept anew: the delivery goes on as a new event's. */
const REVIVED = Symbol("revived");

/** Keep-then-work on one inbox. */
export class Keep {
  readonly #ground: Ground;

  constructor(
    db: KeepDatabase,
    sql: KeepStatements,
    private readonly settings: KeepSettings,
  ) {
    const { scope, retention, now, order } = settings;
    this.#ground = { db, sql, scope, retention, now, order };
  }

  /** The `onEvent` that keeps each event before its 2xx (see the inboxes' `enqueue()`). */
  enqueue<Tx>(options: EnqueueOptions<Tx> = {}): (event: WebhookEvent) => Promise<unknown> {
    if (typeof options !== "object" || options === null) throw new TypeError("flag-webhooks: enqueue() takes options");
    const { run } = options;
    if (run !== undefined && typeof run !== "function") {
      throw new TypeError('flag-webhooks: option "run" of enqueue() must be a handler function');
    }
    const plan = run ? planOf(options) : undefined;
    const telemetry = telemetryOf(options);
    const most = groupCommitOf(options.groupCommit);
    const { sql } = this.#ground;
    const db = this.#ground.db.keeping ?? this.#ground.db;
    // A group's COMMIT holds its place while its statement may still commit, up to twice the bound:
    // the deliveries queued behind it are answered at their own bound and taken out, never sent; a
    // database that never answers gives the place to later deliveries after that.
    const commit = (arrivals: readonly Arrival[], bound: Bound) =>
      this.#bounded(keepAll(db, sql, this.settings.scope, arrivals, bound), bound, 2 * this.settings.timeout);
    const group = most === false ? undefined : new GroupCommit(commit, most);
    // The deliveries of this onEvent on their way to being kept.
    let keeping = 0;
    const handler = async (event: WebhookEvent): Promise<unknown> => {
      keeping++;
      let found: Found | undefined;
      let arrival: Arrival;
      try {
        // Read in the delivery's context, where the receiver runs onEvent: its span is the parent.
        const trace = traceToKeep(telemetry);
        const stored = storedId(event.id);
        arrival = {
          id: typeof stored === "string" ? stored : await stored,
          body: bodyOf(event),
          type: typeOf(event),
          created_at: event.createdAt,
          received_at: this.settings.now(),
          trace,
        };
        // A delivery alone (no other of this onEvent on its way, none in the group: no group
        // would form) is kept at once where the database can, synchronously: nothing can answer
        // it meanwhile, so it needs no bound, timer or promise of its own. The others, and one it
        // cannot keep now, in the group's next COMMIT (or one of their own).
        // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator: which path keeps a delivery, not whether: the group's keeps it the same, at a cost only a benchmark sees
        if (!group || (keeping === 1 && group.idle)) found = this.#keptNow(db, sql, arrival, event.id);
        if (!found) {
          // Its 503 past the bound abandons it: taken out of the group's queue, and SQLite commits nothing of it.
          const bound = Bound.within(this.settings.timeout);
          const kept = () => (group ? group.add(arrival, bound) : commit([arrival], bound).then(([one]) => one));
          found = await this.#store(kept, event.id, bound);
        }
      } finally {
        keeping--;
      }
      const { id } = arrival;
      // A copy of an event kept by the same COMMIT: a duplicate, as any later copy would be.
      if (found === "copy") return duplicateReply();
      if (found === "there") {
        const reply = await this.#met(event.id, arrival);
        if (reply !== REVIVED) return reply;
      }
      if (!(run && plan)) return ACCEPTED;
      // Inline first: the event is kept already, so whatever this attempt does, the answer is a
      // 2xx and a failure is the worker's to retry.
      try {
        const [taken] = await take(this.#ground, plan, 1, id);
        if (taken?.state === "running" && (await tracedAttempt(this.#ground, plan, taken, run)) === "done") {
          return undefined;
        }
      } catch {
        // The failure mark did not land: the lease runs out and a worker takes the event again.
      }
      return ACCEPTED;
    };
    // An inbox's onEvent, so a receiver checks the retention against maxAge when it is made; it
    // enlists nothing (the event commits before this returns), so it needs no delivery.
    return wantsRawBody(inboxHandler(this.settings.retention, (_delivery, event: WebhookEvent) => handler(event)));
  }

  /**
   * What a delivery whose INSERT met a row answers. A copy of a kept or handled event is a
   * duplicate; one that `handle()` or a DedupeStore claim holds right now is in progress, and the
   * sender's retry will find it. An expired row (handled past its retention) is kept anew, as a new
   * event (`REVIVED`). No row at all: the INSERT kept nothing and met none (a trigger or a rule
   * dropped it without an error, or a purge removed the row it met); nothing holds the event, so it
   * is not in progress: nothing was kept, and the sender's retry is the way.
   */
  async #met(id: string, arrival: Arrival): Promise<unknown> {
    const params = arrivalParams(this.settings.scope, arrival);
    const [row] = await this.#store(() => this.#ground.db.query(this.#ground.sql.there, params), id);
    if (row?.revived) return REVIVED;
    if (row === undefined) throw notKept(id, this.settings.name);
    if (!received(row.state)) throw inProgress(id);
    return duplicateReply();
  }

  /** A worker running `fn` on due events (see the inboxes' `work()`). */
  work<Tx>(fn: KeptHandler<Tx>, options: WorkOptions = {}): InboxWorker {
    if (typeof fn !== "function") throw new TypeError("flag-webhooks: inbox.work() takes a handler function");
    if (typeof options !== "object" || options === null) throw new TypeError("flag-webhooks: work() takes options");
    const interval =
      options.interval === false ? false : parseDuration(options.interval ?? "1s", "interval", TIMER_MAX);
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new TypeError('flag-webhooks: option "concurrency" must be a whole number from 1');
    }
    const onError = options.onError ?? ((error: unknown) => console.error("flag-webhooks: inbox worker:", error));
    return new Worker(this.#ground, planOf(options), fn, { interval, concurrency, onError });
  }

  /** The pending (and running) or the parked events, oldest first, at most `limit`. */
  async list(which: "pending" | "parked", limit = LIST_LIMIT): Promise<KeptEvent[]> {
    if (!Number.isInteger(limit) || limit < 1)
      throw new TypeError('flag-webhooks: option "limit" must be a whole number from 1');
    const rows = await this.#ground.db.query(this.#ground.sql[which], [this.settings.scope, limit]);
    return rows.map(keptOf);
  }

  /** One event of this scope, in any state, by its id. */
  async kept(eventId: string): Promise<KeptEvent | undefined> {
    const rows = await this.#ground.db.query(this.#ground.sql.one, [this.settings.scope, await idOf(eventId)]);
    return rows[0] ? keptOf(rows[0]) : undefined;
  }

  /** How many kept events this scope holds in each state. */
  async counts(): Promise<InboxCounts> {
    return countsOf(await this.#ground.db.query(this.#ground.sql.counts, [this.settings.scope]));
  }

  /** Makes parked (and pending) events due now, with a full schedule of attempts; resolves with how many. */
  async replay(target: ReplayTarget): Promise<number> {
    const one = typeof target === "string";
    const since = one ? null : instant(target?.since, "since");
    const id = one ? await idOf(target) : null;
    const rows = await this.#ground.db.query(this.#ground.sql.replay, [
      this.settings.scope,
      this.settings.now(),
      id,
      since,
    ]);
    return rows.length;
  }

  /**
   * Deletes one event, or the events in one state (kept before an instant), but keeps the id of a
   * done one within its retention with its body dropped (see the `purge` statement); resolves with
   * how many it deleted or emptied.
   */
  async purge(target: PurgeTarget): Promise<number> {
    let params: [string | null, string | null, number | null];
    if (typeof target === "string") params = [await idOf(target), null, null];
    else {
      const state = target?.state;
      if (state !== "parked" && state !== "pending" && state !== "done") {
        throw new TypeError(
          'flag-webhooks: purge() takes an event id or { state: "parked" | "pending" | "done", before? }',
        );
      }
      params = [null, state, target.before === undefined ? null : instant(target.before, "before")];
    }
    const { db, sql } = this.#ground;
    const all = [this.settings.scope, ...params, this.settings.now()];
    // The delete first: a row it leaves (done within its retention, if only by now) loses its body.
    const deleted = await db.query(sql.purge, all);
    return deleted.length + (await db.query(sql.purgeBody, all)).length;
  }

  /** A step bounded by the inbox's timeout (or `ms`); past it, `bound` (what the step keeps) is abandoned. */
  #bounded<T>(step: T | Promise<T>, bound?: Bound, ms = this.settings.timeout): Promise<T> {
    const { name } = this.settings;
    return withTimeout(step, ms, () => {
      bound?.abandon();
      return new Error(`${name} did not answer within ${ms} ms`);
    });
  }

  /**
   * A step of the receiving side for `eventId`: bounded by the inbox's timeout (past it, `bound`
   * is abandoned), a 409 when it gave up waiting for the event's row held by another transaction,
   * and a 503 when it fails.
   */
  async #store<T>(step: () => T | Promise<T>, eventId: string, bound?: Bound): Promise<T> {
    try {
      return await this.#bounded(step(), bound);
    } catch (error) {
      throw this.#failed(error, eventId);
    }
  }

  /** A lone delivery kept now, synchronously (see keepNow), its failure answered as by `#store`. */
  // Stryker disable next-line BlockStatement: queryNow answers its failures 503 already, and no database with queryNow says held()
  #keptNow(db: Pick<KeepDatabase, "query" | "queryNow">, sql: KeepStatements, arrival: Arrival, eventId: string) {
    try {
      return keepNow(db, sql, this.settings.scope, arrival);
    } catch (error) {
      throw this.#failed(error, eventId);
    }
  }

  /** What a failed step of the receiving side answers: 409 when it gave up on a row another transaction holds, 503 else. */
  #failed(error: unknown, eventId: string): Error {
    if (this.#ground.db.held?.(error)) return inProgress(eventId);
    return unavailable(error, this.settings.name);
  }
}

/** The answer to a delivery kept for a worker. */
const ACCEPTED = Object.freeze({ status: 202 });

/** The schedule and bounds of `options`, checked. */
function planOf(options: KeepOptions): Plan {
  const deadline = parseDuration(options.deadline ?? "1m", "deadline", TIMER_MAX);
  const lease = parseDuration(options.lease ?? "5m", "lease");
  if (lease <= deadline) throw new TypeError('flag-webhooks: option "lease" must be longer than "deadline"');
  return { schedule: scheduleOf(options), deadline, lease, telemetry: telemetryOf(options) };
}

/** The `groupCommit` option, checked: the most events one COMMIT keeps, or false for one each. */
function groupCommitOf(value: unknown): number | false {
  if (value === undefined || value === true) return GROUP_MOST;
  if (value === false) return false;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new TypeError('flag-webhooks: option "groupCommit" must be false or a whole number from 1');
  }
  return value;
}

/** The `telemetry` option, checked. */
function telemetryOf(options: KeepOptions): InboxTelemetry | undefined {
  const { telemetry } = options;
  if (telemetry === undefined) return undefined;
  if (typeof telemetry?.inject !== "function" || typeof telemetry.attempt !== "function") {
    throw new TypeError('flag-webhooks: option "telemetry" must be an InboxTelemetry, such as openTelemetry()');
  }
  return telemetry;
}

/**
 * The body to keep: the bytes whose signature the receiver verified, as their UTF-8 text (a
 * verified body parsed as JSON, so it is valid UTF-8, and decoding keeps every byte, a byte order
 * mark included). An event that came without a receiver is kept as its JSON, under its type as sent.
 */
function bodyOf(event: WebhookEvent): string {
  const raw = rawBodyOf(event);
  if (raw) return exact.decode(raw);
  const { originalType, ...rest } = event as WebhookEvent & { originalType?: string };
  return JSON.stringify(originalType === undefined ? rest : { ...rest, type: originalType });
}

/**
 * The type the listings show: as sent, but a NUL as U+FFFD, since a Postgres text column cannot
 * hold one (the event would be refused on every retry, never kept); the body keeps it as sent.
 */
function typeOf(event: WebhookEvent): string {
  return ((event as { originalType?: string }).originalType ?? event.type).replaceAll("\0", "\uFFFD");
}

/**
 * The stored id of `eventId`: the event's own id by the stores' one rule, or, for an id as
 * pending() and parked() list it, that id itself. A hashed stored id is `#` and 64 hex digits, and
 * an event id that starts with `#` is always hashed, so the listed form never names another event.
 */
function idOf(eventId: unknown): string | Promise<string> {
  if (typeof eventId !== "string") throw new TypeError("flag-webhooks: an event id is a string");
  return HASHED.test(eventId) ? eventId : storedId(eventId);
}

/** A hashed stored id (see storedId). */
const HASHED = /^#[0-9a-f]{64}$/;

function instant(value: unknown, option: string): number {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== "number" || !Number.isFinite(ms)) {
    throw new TypeError(`flag-webhooks: option "${option}" must be a Date or ms since the epoch`);
  }
  return ms;
}

function keptOf(row: KeepRow): KeptEvent {
  const number = (value: unknown) => (value === null || value === undefined ? null : Number(value));
  const text = (value: unknown) => (value === null || value === undefined ? null : String(value));
  return {
    id: String(row.id),
    state: String(row.state) as InboxState,
    type: text(row.type),
    createdAt: text(row.created_at),
    receivedAt: number(row.received_at),
    attempts: Number(row.attempts ?? 0),
    nextAttemptAt: number(row.next_at),
    lastError: text(row.last_error),
    body: text(row.body),
  };
}
