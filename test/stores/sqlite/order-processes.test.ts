import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { describe, expect, it } from "vitest";
import { MIRROR_ROWS, MIRROR_TABLE, sqlite } from "../../support/order-mirror.js";
import { raceTwoReceivers } from "../../support/order-processes.js";
import { databaseFile } from "../../support/sqlite.js";

// Two receiver processes on one SQLite file (better-sqlite3, WAL), the same shuffled stream sent
// to both at once: the flag's positions are read and written in each handler's transaction, so
// the mirror the handlers write ends as the history applied in order, 0 wrong fields.

describe("SqliteInbox with order, two processes on one file", () => {
  it("ends with the in-order state: 0 wrong fields", async () => {
    const file = databaseFile();
    const db = new Database(file);
    try {
      db.pragma("journal_mode = wal");
      await new SqliteInbox(db, { scope: "race", order: true }).migrate();
      db.exec(MIRROR_TABLE);
      const result = await raceTwoReceivers(
        { FILE: file },
        "race",
        async () => db.prepare(sqlite(MIRROR_ROWS)).all("race") as Record<string, unknown>[],
      );
      expect(result.fields).toBeGreaterThan(0);
      expect(result.wrong).toBe(0);
      expect(result.mirror).toEqual(result.expected);
    } finally {
      db.close();
    }
  }, 120_000);
});
