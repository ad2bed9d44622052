// What keep-then-work needs of a database, whichever it is: one statement committed on its own,
// and a transaction held open while a handler runs. The Postgres and SQLite inboxes each give
// this (src/stores/postgres/keep.ts, src/stores/sqlite/keep.ts); everything else is shared.
import type { PositionsInTransaction } from "../order/in-transaction.js";

/** A value the statements bind. */
export type KeepParam = string | number | null;

/** A row as a driver returns it. */
export type KeepRow = Record<string, unknown>;

/** A transaction whose first statement ran, held open until the worker commits or rolls it back. */
export interface HeldTransaction {
  /** What the handler gets as `tx`. */
  readonly tx: unknown;
  /** The rows of the first statement. */
  readonly rows: readonly KeepRow[];
  /** One statement inside the transaction. */
  query(sql: string, params: readonly KeepParam[]): Promise<readonly KeepRow[]>;
  /** COMMIT; rejects when the transaction did not commit (the handler ended it, the database failed). */
  commit(): Promise<void>;
  /**
   * The positions of the flag given to `begin`, read by the first statement and written with the
   * COMMIT, where the database folds them so (Postgres); absent, they are read and written by
   * statements of their own.
   */
  readonly positions?: PositionsInTransaction;
  /** Rolls back; never rejects. */
  rollback(): Promise<void>;
  /**
   * Gives up while the handler may still be running (past its deadline): nothing of it commits, and
   * resolves once the database was told to let go of the transaction and its locks. Never rejects.
   */
  abandon(): Promise<void>;
}

/**
 * The bound on a statement that keeps deliveries: its turn and lock are not waited for past
 * `deadline`, and it must not begin (or, where the database can hold to it, commit) once one of
 * its deliveries was answered 503 past its own bound: that answer says nothing was kept.
 */
export interface KeepBound {
  /** ms since the epoch: the earliest deadline of the deliveries the statement keeps. */
  readonly deadline: number;
  /** Whether a delivery the statement keeps was answered already (past its bound). */
  abandoned(): boolean;
}

/** A database, as keep-then-work uses it. */
export interface KeepDatabase {
  /**
   * How many transactions it holds open at once (a pool's, SQLite's one): a worker takes no more
   * events at a time, so its attempts do not wait for one another's connections.
   */
  readonly capacity: number;
  /**
   * One statement, committed on its own; `bound` for one that keeps deliveries, which a database
   * that runs it synchronously (SQLite) holds to exactly: it waits no later than the deadline, and
   * commits nothing once a delivery of it was answered.
   */
  query(sql: string, params: readonly KeepParam[], bound?: KeepBound): Promise<readonly KeepRow[]>;
  /**
   * `query` made now, synchronously, where the database can (a synchronous SQLite driver, its
   * turn and write lock free): the rows, committed; undefined when it cannot be now (then `query`).
   */
  queryNow?(sql: string, params: readonly KeepParam[], bound?: KeepBound): readonly KeepRow[] | undefined;
  /**
   * Where the receiving side keeps its deliveries, when not here: a connection of the inbox's own
   * (SQLite's `keepOn`), whose statements commit on their own in the same way.
   */
  keeping?: Pick<KeepDatabase, "query" | "queryNow">;
  /**
   * A transaction of its own, whose first statement is `sql`; `flag`, the key of an ordered
   * event's flag when the inbox has `order`, for a database that reads its positions in that
   * statement.
   */
  begin(sql: string, params: readonly KeepParam[], flag?: string): Promise<HeldTransaction>;
  /**
   * Whether `error` is a statement that gave up waiting for a row another transaction holds (a
   * copy of the event in flight there): the delivery is in progress (409), the database did not
   * fail. Absent where statements wait for no row (SQLite).
   */
  held?(error: unknown): boolean;
}
