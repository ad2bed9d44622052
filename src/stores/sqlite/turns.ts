// SQLite has one writer, and a connection holds at most one transaction: the inbox runs one
// transaction at a time per connection, whichever inbox (scope, table) runs it, and a delivery
// waits for its turn, for a bounded time. And what SQLite says when the write lock is taken, or
// when the store itself failed rather than a handler's statement.

/** One holder at a time: `take(deadline)` resolves with the function that gives the turn back. */
export class Turns {
  #held = false;
  readonly #waiting: { grant: () => void }[] = [];

  /** Whether nobody holds the turn: then no transaction of an inbox is open on the connection. */
  get free(): boolean {
    return !this.#held;
  }

  /** The turn at once, when nobody holds it: the function that gives it back; else undefined. */
  takeNow(): (() => void) | undefined {
    if (this.#held) return undefined;
    this.#held = true;
    return this.#giver();
  }

  /**
   * The turn at once, when nobody holds it, without a giver: true when taken, to be given back by
   * {@link giveBack} (once) before anything awaits; for a holder that gives it back in the same tick.
   */
  holdNow(): boolean {
    if (this.#held) return false;
    this.#held = true;
    return true;
  }

  /** Gives back the turn taken by {@link holdNow}, to the next in line. */
  giveBack(): void {
    const next = this.#waiting.shift();
    if (next) next.grant();
    else this.#held = false;
  }

  /**
   * Waits for the turn until `deadline` (ms since the epoch); past it, rejects with `expired()`
   * and leaves the queue.
   */
  take(deadline: number, expired: () => unknown): Promise<() => void> {
    const now = this.takeNow();
    if (now) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: () => {
          clearTimeout(timer);
          resolve(this.#giver());
        },
      };
      const timer = setTimeout(
        () => {
          const index = this.#waiting.indexOf(waiter);
          if (index >= 0) this.#waiting.splice(index, 1);
          reject(expired());
        },
        Math.max(0, deadline - Date.now()),
      );
      this.#waiting.push(waiter);
    });
  }

  /** The function that gives the turn back, once (later calls do nothing), to the next in line. */
  #giver(): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.giveBack();
    };
  }
}

// One registry per process, shared by every copy of this module (the ES module and CommonJS
// builds), so two inboxes on one connection take turns whichever copy made them.
const KEY = Symbol.for("flag-webhooks.sqlite-turns");
const shared = globalThis as { [KEY]?: WeakMap<object, Turns> };
shared[KEY] ??= new WeakMap();
const registry = shared[KEY];

/** The turns of one connection (or client), shared by every inbox on it. */
export function turnsOf(connection: object): Turns {
  let turns = registry.get(connection);
  if (!turns) {
    turns = new Turns();
    registry.set(connection, turns);
  }
  return turns;
}

/** SQLite's primary result codes the inbox tells apart, by number. */
const CODES: Record<number, string> = {
  5: "BUSY",
  6: "LOCKED",
  7: "NOMEM",
  8: "READONLY",
  10: "IOERR",
  11: "CORRUPT",
  13: "FULL",
  14: "CANTOPEN",
  15: "PROTOCOL",
  26: "NOTADB",
};
/** The codes that say the database failed, not the statement: the answer is 503, not 500. */
const STORE_FAILURES = new Set([
  "BUSY",
  "LOCKED",
  "NOMEM",
  "READONLY",
  "IOERR",
  "CORRUPT",
  "FULL",
  "CANTOPEN",
  "NOTADB",
]);

/**
 * The primary SQLite result code of a driver's error (`"BUSY"`, `"FULL"`, …), however the driver
 * spells it: better-sqlite3, bun:sqlite and libSQL as `code: "SQLITE_FULL"` (or an extended
 * `"SQLITE_IOERR_WRITE"`), node:sqlite as `errcode: 13`, a libSQL server as `rawCode`.
 */
export function sqliteCode(error: unknown): string | undefined {
  const e = error as { code?: unknown; errcode?: unknown; errno?: unknown; rawCode?: unknown } | null;
  if (typeof e?.code === "string") {
    const match = /^SQLITE_([A-Z]+)/.exec(e.code);
    if (match) return match[1];
  }
  for (const value of [e?.errcode, e?.rawCode, e?.errno]) {
    if (typeof value === "number" && CODES[value & 0xff]) return CODES[value & 0xff];
  }
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message === "string" && /database is locked/i.test(message)) return "BUSY";
  return undefined;
}

/** Whether another connection holds the lock: the inbox waits and tries again. */
export function isBusy(error: unknown): boolean {
  const code = sqliteCode(error);
  return code === "BUSY" || code === "LOCKED";
}

/** Whether the database failed (full, read-only, I/O, locked, gone…), not the statement. */
export function isStoreFailure(error: unknown): boolean {
  return STORE_FAILURES.has(sqliteCode(error) as string);
}

/** The error of a delivery that did not get the turn and the write lock within `timeout` ms. */
export function turnExpired(timeout: number): Error {
  return new Error(`SQLite did not give the inbox its turn and the write lock within ${timeout} ms`);
}

/** Waits `ms`, with a little jitter so processes waiting for one lock do not retry in step. */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms * (0.75 + Math.random() / 2)));
}
