import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { turnsOf } from "../../../src/stores/sqlite/turns.js";
import {
  busyTimeoutOn,
  oneStatement,
  oneWrites,
  preparedOn,
  type SyncShape,
  walOn,
} from "../../../src/stores/sqlite/without-waiting.js";
import { databaseFile } from "../../support/sqlite.js";

// A synchronous connection's one-statement writes, as the driver builds them, on real files: what
// another connection sees once a write returned, the app's busy_timeout after it, and the
// connection's shape without better-sqlite3's pluck() (node:sqlite's: its statements have all()
// and run() only; Node 20, where Stryker runs, has no node:sqlite, so its shape is better-sqlite3's
// statements with pluck() left out).

const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});

/** A connection on a new file in `journal` mode, with the app's `busyTimeout`, and its table `t`. */
function open(journal: "wal" | "delete", busyTimeout: number) {
  const file = databaseFile();
  const db = new Database(file, { timeout: busyTimeout });
  opened.push(db);
  db.pragma(`journal_mode = ${journal}`);
  db.exec("create table t (id text primary key)");
  const other = new Database(file);
  opened.push(other);
  const seen = () =>
    other
      .prepare("select id from t order by id")
      .all()
      .map((row) => (row as { id: string }).id);
  return { db, seen };
}

/** `db` with node:sqlite's shape: statements with all() and run(), no pluck(). */
function withoutPluck(db: Database.Database): SyncShape {
  return {
    prepare(sql) {
      const statement = db.prepare(sql);
      return { all: (...params) => statement.all(...params) as never, run: (...params) => statement.run(...params) };
    },
    exec: (sql) => db.exec(sql),
  };
}

/** The driver's write of one statement, as syncDriver builds it. */
function writesOn(connection: SyncShape, turnsKey: object) {
  const statement = preparedOn(connection);
  return oneWrites(
    turnsOf(turnsKey),
    oneStatement(connection, statement, walOn(connection, ""), busyTimeoutOn(connection)),
  );
}

describe("walOn and busyTimeoutOn on a connection whose statements have no pluck()", () => {
  it("a WAL file is read as WAL and a rollback journal's is not; the app's busy_timeout is read", () => {
    const wal = open("wal", 1234);
    expect(walOn(withoutPluck(wal.db), "").now()).toBe(true);
    expect(busyTimeoutOn(withoutPluck(wal.db))()).toBe(1234);

    const journal = open("delete", 0);
    expect(walOn(withoutPluck(journal.db), "").now()).toBe(false);
    expect(busyTimeoutOn(withoutPluck(journal.db))()).toBe(0);
  });

  it("a write on WAL without pluck() is committed: another connection sees it", () => {
    const { db, seen } = open("wal", 500);
    const shape = withoutPluck(db);
    expect(writesOn(shape, shape).writeNow?.("insert into t values (?) returning id", ["a"])).toEqual([{ id: "a" }]);
    expect(seen()).toEqual(["a"]);
  });
});

describe("oneStatement on a synchronous connection", () => {
  it("the app's busy_timeout 0 on a rollback journal: each write committed, the busy_timeout still 0", () => {
    const { db, seen } = open("delete", 0);
    const { writeNow } = writesOn(db as unknown as SyncShape, db);
    expect(writeNow?.("insert into t values (?) returning id", ["a"])).toEqual([{ id: "a" }]);
    expect(writeNow?.("insert into t values (?) returning id", ["b"])).toEqual([{ id: "b" }]);
    expect(seen()).toEqual(["a", "b"]);
    expect(db.pragma("busy_timeout", { simple: true })).toBe(0);
  });

  it("WAL, then the app takes the file out of WAL on this connection: the next write committed by a rollback journal's path", () => {
    const { db, seen } = open("wal", 700);
    const { writeNow } = writesOn(db as unknown as SyncShape, db);
    expect(writeNow?.("insert into t values (?) returning id", ["a"])).toEqual([{ id: "a" }]);
    expect(db.pragma("journal_mode = delete", { simple: true })).toBe("delete");
    expect(writeNow?.("insert into t values (?) returning id", ["b"])).toEqual([{ id: "b" }]);
    expect(seen()).toEqual(["a", "b"]);
    expect(db.pragma("busy_timeout", { simple: true })).toBe(700);
  });
});

describe("writeNow while the connection's turn is taken", () => {
  it("nothing written and undefined, with no bound or with one; written once the turn is free", async () => {
    const { db, seen } = open("wal", 500);
    const { writeNow } = writesOn(db as unknown as SyncShape, db);
    const free = await turnsOf(db).take(Date.now() + 1000, () => new Error("expired"));
    expect(writeNow?.("insert into t values (?) returning id", ["a"])).toBeUndefined();
    expect(writeNow?.("insert into t values (?) returning id", ["a"], { abandoned: () => false })).toBeUndefined();
    expect(seen()).toEqual([]);
    free();
    expect(writeNow?.("insert into t values (?) returning id", ["a"], { abandoned: () => true })).toBeUndefined();
    expect(seen()).toEqual([]);
    expect(writeNow?.("insert into t values (?) returning id", ["a"])).toEqual([{ id: "a" }]);
    expect(seen()).toEqual(["a"]);
  });
});
