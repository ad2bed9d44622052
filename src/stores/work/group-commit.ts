// Group commit on the receiving side: each delivery's 2xx waits for its row's COMMIT, and one
// COMMIT costs about as much for many rows as for one (its flush to disk). So accepts that arrive
// while a COMMIT is in flight wait together, and the next COMMIT keeps them all in one statement;
// each is then answered from its own row. There is no timer: an accept that finds nothing in
// flight is committed at once, alone, and batches form only because a COMMIT takes time.
import type { KeepDatabase, KeepParam, KeepRow } from "./database.js";
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

/** Keeps `arrivals` in one COMMIT (one statement, so all or none): what each found, in order. */
export async function keepAll(
  db: KeepDatabase,
  sql: KeepStatements,
  scope: string,
  arrivals: readonly Arrival[],
): Promise<Found[]> {
  // A second copy of an id in one COMMIT is not sent: one statement must not meet its own row.
  const first = new Map<string, Arrival>();
  for (const arrival of arrivals) if (!first.has(arrival.id)) first.set(arrival.id, arrival);
  const unique = [...first.values()];
  let rows: readonly KeepRow[];
  if (unique.length === 1) {
    const [a] = unique as [Arrival];
    rows = await db.query(sql.insert, arrivalParams(scope, a));
  } else {
    const json = JSON.stringify(unique.map((a) => Object.fromEntries(ARRIVAL_FIELDS.map((f) => [f, a[f]]))));
    rows = await db.query(sql.insertMany, [scope, json]);
  }
  const kept = new Set(rows.map((row) => String(row.id)));
  return arrivals.map((arrival) => {
    if (first.get(arrival.id) !== arrival) return kept.has(arrival.id) ? "copy" : "there";
    return kept.has(arrival.id) ? "kept" : "there";
  });
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/**
 * One COMMIT in flight at a time; what arrives meanwhile waits, and goes in the next one (at most
 * `most` at once). A failed COMMIT of several is tried again one item at a time, so an item is
 * rejected only when its own COMMIT fails: none of it was kept.
 */
export class GroupCommit<T, R> {
  readonly #waiting: Waiting<T, R>[] = [];
  #flying = false;

  constructor(
    private readonly commit: (items: readonly T[]) => Promise<readonly R[]>,
    private readonly most: number,
  ) {}

  /** Resolves with `item`'s own result once the COMMIT that held it ended. */
  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#waiting.push({ item, resolve, reject });
      if (!this.#flying) this.#next();
    });
  }

  #next(): void {
    const batch = this.#waiting.splice(0, this.most);
    if (batch.length === 0) return;
    this.#flying = true;
    const done = () => {
      this.#flying = false;
      this.#next();
    };
    let committed: Promise<readonly R[]>;
    try {
      committed = this.commit(batch.map((waiting) => waiting.item));
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
      const [result] = await this.commit([waiting.item]);
      waiting.resolve(result as R);
    } catch (error) {
      waiting.reject(error);
    }
  }
}
