// The parts of node:sqlite (Node 22.5 and later) and bun:sqlite (Bun) that the SQLite tests, the
// demo and docs/sqlite.md use, declared here because the project types against Node 20, whose
// @types/node has neither module. Written from the runtimes' documented APIs; tsconfig.test.json
// lists this file, so every program it makes (the docs' snippets too) knows both modules.

declare module "node:sqlite" {
  /** Values a statement binds and returns. */
  type SQLInputValue = null | number | bigint | string | Uint8Array;
  type SQLOutputValue = null | number | bigint | string | Uint8Array;

  interface StatementResultingChanges {
    changes: number | bigint;
    lastInsertRowid: number | bigint;
  }

  class StatementSync {
    all(...params: SQLInputValue[]): Record<string, SQLOutputValue>[];
    get(...params: SQLInputValue[]): Record<string, SQLOutputValue> | undefined;
    run(...params: SQLInputValue[]): StatementResultingChanges;
  }

  interface DatabaseSyncOptions {
    open?: boolean;
    readOnly?: boolean;
    /** The busy timeout, in ms. */
    timeout?: number;
  }

  class DatabaseSync {
    constructor(path: string, options?: DatabaseSyncOptions);
    /** Whether a transaction is open on the connection. */
    readonly isTransaction: boolean;
    readonly isOpen: boolean;
    close(): void;
    exec(sql: string): void;
    prepare(sql: string): StatementSync;
  }
}

declare module "bun:sqlite" {
  type SQLQueryBindings = null | number | bigint | string | boolean | Uint8Array;

  class Statement<Row = Record<string, unknown>> {
    all(...params: SQLQueryBindings[]): Row[];
    get(...params: SQLQueryBindings[]): Row | null;
    run(...params: SQLQueryBindings[]): { changes: number; lastInsertRowid: number | bigint };
  }

  class Database {
    constructor(
      filename?: string,
      options?: { readonly?: boolean; create?: boolean; readwrite?: boolean; strict?: boolean },
    );
    /** Whether a transaction is open on the connection. */
    readonly inTransaction: boolean;
    close(): void;
    exec(sql: string, ...params: SQLQueryBindings[]): void;
    run(sql: string, ...params: SQLQueryBindings[]): void;
    prepare<Row = Record<string, unknown>>(sql: string): Statement<Row>;
    query<Row = Record<string, unknown>>(sql: string): Statement<Row>;
  }
}
