// Group commit on the receiving side: each delivery's 2xx waits for its row's COMMIT, and one
// COMMIT costs about as much for many rows as for one (its flush to disk). So accepts that arrive
// while a COMMIT is in flight wait together, and the next COMMIT keeps them all in one statement;
// each is then answered from its own row. There is no timer: an accept that finds nothing in
// flight is committed at once, alone, and batches form only because a COMMIT takes time.
import type { KeepBound, KeepDatabase, KeepParam, KeepRow } from "./database.js";
import { ARRIVAL_FIELDS, type KeepStatements } from "./statements.js";

/** One event to keep: the values of its row. */
export interface Arrival {
  id: string;
  body: string;
  type: string;
  created_at: string;
  received_at: number;
  trace: string | null;
}

/**
 * What keeping an event found: its row `kept` now; a `copy` of an event another delivery of the
 * same COMMIT kept; or its row `there` already (a copy, or an id `handle()` holds), to look at.
 */
export type Found = "kept" | "copy" | "there";

/** The parameters of one arrival's statements (`insert`, `there`), in their order. */
export function arrivalParams(scope: string, a: Arrival): KeepParam[] {
  return [scope, a.id, a.body, a.type, a.created_at, a.received_at, a.trace];
}

/** Keeps `arrivals` in one COMMIT (one statement, so all or none), within `bound`: what each found, in order. */
export async function keepAll(
  db: Pick<KeepDatabase, "query" | "queryNow">,
  sql: KeepStatements,
  scope: string,
  arrivals: readonly Arrival[],
  bound?: KeepBound,
): Promise<Found[]> {
  // A second copy of an id in one COMMIT is not sent: one statement must not meet its own row.
  const first = new Map<string, Arrival>();
  for (const arrival of arrivals) if (!first.has(arrival.id)) first.set(arrival.id, arrival);
  const unique = [...first.values()];
  let rows: readonly KeepRow[];
  if (unique.length === 1) {
    const [a] = unique as [Arrival];
    rows = await db.query(sql.insert, arrivalParams(scope, a), bound);
  } else {
    const json = JSON.stringify(unique.map((a) => Object.fromEntries(ARRIVAL_FIELDS.map((f) => [f, a[f]]))));
    rows = await db.query(sql.insertMany, [scope, json], bound);
  }
  const kept = keptIn(rows);
  return arrivals.map((arrival) => {
    if (first.get(arrival.id) !== arrival) return kept.has(arrival.id) ? "copy" : "there";
    return kept.has(arrival.id) ? "kept" : "there";
  });
}

/**
 * Keeps one arrival now, synchronously, where the database can (see KeepDatabase.queryNow): what
 * it found, as keepAll would; undefined when it cannot be kept now (then keepAll).
 */
export function keepNow(
  db: Pick<KeepDatabase, "query" | "queryNow">,
  sql: KeepStatements,
  scope: string,
  arrival: Arrival,
  bound?: KeepBound,
): Found | undefined {
  const rows = db.queryNow?.(sql.insert, arrivalParams(scope, arrival), bound);
  if (!rows) return undefined;
  // The rule of keptIn, for one arrival, with no Set built.
  // Stryker disable next-line ConditionalExpression: a one-row keep returns no row but its own (a row it met is not returned)
  for (const row of rows) if (keptId(row) === arrival.id) return "kept";
  // Stryker disable next-line StringLiteral: a falsy answer sends the delivery to the waiting path, whose statement meets the same row: "there" either way
  return "there";
}

/** The id of a row a keeping statement returned: one it kept (a row it met is not returned). */
function keptId(row: KeepRow): string {
  return String(row.id);
}

/** The ids a keeping statement kept: the rows it returned. */
function keptIn(rows: readonly KeepRow[]): Set<string> {
  return new Set(rows.map(keptId));
}

/**
 * A bound on keeping (see KeepBound): a delivery's, from its start, or a COMMIT's of several
 * (the earliest deadline, abandoned once any delivery of it is). `abandon()` once its answer left.
 */
export class Bound implements KeepBound {
  #abandoned = false;

  constructor(
    readonly deadline: number,
    private readonly of: readonly KeepBound[] = [],
  ) {}

  /** A delivery's bound: `ms` from now. */
  static within(ms: number): Bound {
    return new Bound(Date.now() + ms);
  }

  /** The bound of one COMMIT keeping the deliveries of `bounds`. */
  static all(bounds: readonly KeepBound[]): Bound {
    return new Bound(Math.min(...bounds.map((bound) => bound.deadline)), bounds);
  }

  abandoned(): boolean {
    return this.#abandoned || this.of.some((bound) => bound.abandoned());
  }

  /** Its answer left (a 503 past the bound): nothing of it may commit from now on. */
  abandon(): void {
    this.#abandoned = true;
  }
}

interface Waiting<T, R> {
  item: T;
  bound: KeepBound;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/** The rejection of a delivery taken out before its COMMIT began: its 503 has left already. */
const answered = () => new Error("flag-webhooks: the delivery was answered before its COMMIT began");

/**
 * One COMMIT in flight at a time; what arrives meanwhile waits, and goes in the next one (at most
 * `most` at once). A failed COMMIT of several is tried again one item at a time, so an item is
 * rejected only when its own COMMIT fails: none of it was kept. An item whose bound was abandoned
 * (its delivery answered 503) while it waited is taken out, never sent: that 503 stays true.
 */
export class GroupCommit<T, R> {
  readonly #waiting: Waiting<T, R>[] = [];
  #flying = false;

  constructor(
    private readonly commit: (items: readonly T[], bound: Bound) => Promise<readonly R[]>,
    private readonly most: number,
  ) {}

  /** Whether no COMMIT is in flight and nothing waits for one. */
  get idle(): boolean {
    return !this.#flying && this.#waiting.length === 0;
  }

  /** Resolves with `item`'s own result once the COMMIT that held it ended; `bound` is its delivery's. */
  add(item: T, bound: KeepBound): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#waiting.push({ item, bound, resolve, reject });
      if (!this.#flying) this.#next();
    });
  }

  #next(): void {
    const batch: Waiting<T, R>[] = [];
    while (batch.length < this.most && this.#waiting.length > 0) {
      const waiting = this.#waiting.shift() as Waiting<T, R>;
      if (waiting.bound.abandoned()) waiting.reject(answered());
      else batch.push(waiting);
    }
    if (batch.length === 0) return;
    this.#flying = true;
    const done = () => {
      this.#flying = false;
      this.#next();
    };
    let committed: Promise<readonly R[]>;
    try {
      committed = this.commit(
        batch.map((waiting) => waiting.item),
        Bound.all(batch.map((waiting) => waiting.bound)),
      );
    } catch (error) {
      committed = Promise.reject(error);
    }
    committed.then(
      (results) => {
        batch.forEach((waiting, i) => {
          waiting.resolve(results[i] as R);
        });
        done();
      },
      (error: unknown) => {
        if (batch.length === 1) {
          batch[0]?.reject(error);
          done();
          return;
        }
        // One row the database refuses (a trigger, a constraint, a value it cannot store) must not
        // cost the deliveries that shared its COMMIT their 2xx: the failed statement kept nothing,
        // so each is kept again in a COMMIT of its own, and only what fails alone is answered 503.
        // A COMMIT whose outcome was lost finds its rows there, which answers them as copies.
        void Promise.allSettled(batch.map((waiting) => this.#alone(waiting))).then(done);
      },
    );
  }

  async #alone(waiting: Waiting<T, R>): Promise<void> {
    try {
      if (waiting.bound.abandoned()) throw answered();
      const [result] = await this.commit([waiting.item], Bound.all([waiting.bound]));
      waiting.resolve(result as R);
    } catch (error) {
      waiting.reject(error);
    }
  }
}
