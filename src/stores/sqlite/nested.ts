// What a SQLite handler gets as `tx`: the connection (or libSQL's Transaction) itself, but with
// its transaction statements routed through the one rule of src/stores/nested-transactions.ts
// (BEGIN, COMMIT, END, ROLLBACK become savepoints of the inbox's transaction), and closed once the
// inbox's transaction has ended: a late handler (one past its deadline, or one that left work
// running) must not write on a connection whose next transaction is another delivery's, nor
// outside any, where each write would commit on its own.
import { Nesting, stepsOf } from "../nested-transactions.js";

type Method = (...args: unknown[]) => unknown;

/** What the handler gets as `tx`, and the check that it ended every transaction it began through it. */
export interface HandlerTx {
  tx: unknown;
  /** Throws when the handler left open a transaction it began through `tx` (a savepoint the inbox would commit). */
  finished(): void;
}

/** The error a handler's statement gets once the inbox's transaction has ended. */
function closed(): Error {
  return new Error(
    "flag-webhooks: the inbox's transaction has ended (the handler ran past handlerTimeout, or kept working after it returned): this statement through tx is not run",
  );
}

/**
 * A synchronous connection for the handler: `exec` and `prepare` send a transaction statement as
 * the savepoints `nesting` says, and fail once `open()` is false (a statement prepared before
 * then is the driver's own, and runs). Anything else (better-sqlite3's `transaction()`, which nests with
 * savepoints of its own inside a transaction) is the connection's own.
 */
export function syncTx(db: object, open: () => boolean): HandlerTx {
  const nesting = new Nesting();
  const connection = db as { exec: Method; prepare: Method };
  const live = () => {
    if (!open()) throw closed();
  };
  const exec = (sql: unknown) => {
    live();
    const steps = typeof sql === "string" ? stepsOf(sql, "sqlite") : undefined;
    if (!steps) return connection.exec(sql);
    nesting.run(steps, (each) => connection.exec(each));
    return proxy;
  };
  const prepare = (sql: unknown, ...rest: unknown[]) => {
    live();
    const steps = typeof sql === "string" ? stepsOf(sql, "sqlite") : undefined;
    // The statement itself is the driver's: an app may keep it and run it in later deliveries.
    if (!steps) return connection.prepare(sql, ...rest);
    // A transaction statement runs when the statement does, at the depth of that moment.
    const run = () => {
      live();
      nesting.run(steps, (each) => connection.exec(each));
    };
    return {
      run: () => {
        run();
        return { changes: 0, lastInsertRowid: 0 };
      },
      all: () => {
        run();
        return [];
      },
      get: () => run(),
      iterate: () => {
        run();
        return [][Symbol.iterator]();
      },
    };
  };
  const proxy = forwarding(db, { exec, prepare }, live);
  return { tx: proxy, finished: () => nesting.finished() };
}

/**
 * libSQL's Transaction for the handler: `execute` and `executeMultiple` send a transaction
 * statement as savepoints; `commit`, `rollback` and `close`, which would end the inbox's
 * transaction, are refused, as is a `batch` holding a transaction statement; every call fails
 * once `open()` is false.
 */
export function libsqlTx(tx: object, open: () => boolean): HandlerTx {
  const nesting = new Nesting();
  const target = tx as Record<string, Method>;
  const live = () => {
    if (!open()) throw closed();
  };
  // Stryker disable OptionalChaining: a libSQL Transaction has every method called here, and a null statement fails in the driver either way
  const sqlOf = (statement: unknown) =>
    typeof statement === "string" ? statement : (statement as { sql?: unknown } | null)?.sql;
  // libSQL is handed the text read here, never the statement's own `sql` again (a getter could
  // answer it a COMMIT where it answered this reading a SELECT).
  const readOnce = (statement: unknown, sql: unknown) =>
    typeof statement === "object" && statement !== null && typeof sql === "string"
      ? Object.create(statement, { sql: { value: sql, enumerable: true } })
      : statement;
  const execute = async (statement: unknown, ...rest: unknown[]) => {
    live();
    const sql = sqlOf(statement);
    const steps = typeof sql === "string" ? stepsOf(sql, "sqlite") : undefined;
    if (!steps) return target.execute?.(readOnce(statement, sql), ...rest);
    const results = await nesting.runAsync(steps, async (each) => target.execute?.(each));
    return results.at(-1);
  };
  const refuse = (what: string) => () => {
    throw new Error(
      `flag-webhooks: refused through the inbox's tx: ${what}: the inbox commits the event id and the handler's writes together once the delivery is answered 2xx; return to commit, throw to roll back, or BEGIN and COMMIT through tx.execute for a savepoint of your own`,
    );
  };
  const handlerTx = forwarding(
    tx,
    {
      execute,
      executeMultiple: async (sql: unknown) => {
        live();
        const steps = typeof sql === "string" ? stepsOf(sql, "sqlite") : undefined;
        if (!steps) return target.executeMultiple?.(sql);
        await nesting.runAsync(steps, async (each) => target.execute?.(each));
      },
      batch: async (statements: unknown, ...rest: unknown[]) => {
        live();
        const list = Array.isArray(statements) ? statements.map((s) => readOnce(s, sqlOf(s))) : statements;
        if (Array.isArray(list) && list.some((s) => stepsOf(String(sqlOf(s) ?? ""), "sqlite")))
          refuse("a batch with BEGIN, COMMIT or ROLLBACK")();
        return target.batch?.(list, ...rest);
      },
      commit: refuse("tx.commit()"),
      rollback: refuse("tx.rollback()"),
      close: refuse("tx.close()"),
    },
    live,
  );
  // Stryker restore OptionalChaining
  return { tx: handlerTx, finished: () => nesting.finished() };
}

/**
 * `target` with `own` in place of its members of those names, and its other methods called on
 * it, each after `live()` (which throws once the transaction has ended).
 */
function forwarding(target: object, own: Record<string, unknown>, live: () => void): object {
  return new Proxy(target, {
    get(object, key) {
      if (Object.hasOwn(own, key)) return own[key as string];
      const value = Reflect.get(object, key, object);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        live();
        return (value as Method).apply(object, args);
      };
    },
  });
}
