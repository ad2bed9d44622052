import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll } from "vitest";
import type { KeepingInbox } from "../../support/keep-then-work.js";
import { MIRROR_ROWS, MIRROR_TABLE, snapshotOf, sqlite } from "../../support/order-mirror.js";
import { describeOrderedWorker } from "../../support/order-worker.js";
import { databaseFile } from "../../support/sqlite.js";

// Ordered delivery through keep-then-work on a real SQLite file (better-sqlite3, WAL): the worker
// reads and writes the flag's positions in each attempt's transaction, with the handler's mirror rows.

const db = new Database(databaseFile());
db.pragma("journal_mode = wal");
// Commits durable to the WAL, not to the disk: a property test is not a crash test.
db.pragma("synchronous = normal");
db.exec(MIRROR_TABLE);
afterAll(() => db.close());

describeOrderedWorker(
  "SQLite over better-sqlite3",
  async () => ({
    async inbox(scope, now, handleStale = false) {
      const inbox = new SqliteInbox(db, { scope, now, order: { handleStale } });
      await inbox.migrate();
      return inbox as unknown as KeepingInbox;
    },
    exec: async (tx, sql, params) => (tx as Database.Database).prepare(sqlite(sql)).run(...params),
    mirror: async (scope) => snapshotOf(db.prepare(sqlite(MIRROR_ROWS)).all(scope) as Record<string, unknown>[]),
  }),
  { runs: 500 },
);
