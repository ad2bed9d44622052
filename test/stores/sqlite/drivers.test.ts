import { resolve } from "node:path";
import { createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import {
  asyncDriver,
  type InteractiveDriver,
  isAsyncClient,
  isConnection,
  type OpenTransaction,
  syncDriver,
} from "../../../src/stores/sqlite/drivers.js";
import type { SqliteAsyncClient, SqliteAsyncTransaction } from "../../../src/stores/sqlite/types.js";
import { type Started, startProcess, untilPrinted } from "../../support/processes.js";
import { databaseFile } from "../../support/sqlite.js";

// The SQLite inbox's view of a database with interactive transactions (a synchronous connection,
// or a libSQL client), driven as the inbox drives it: how each is told by its shape, how a
// transaction that already ended is kept away from the next one on the same connection, what a
// COMMIT that fails or meets a transaction the handler ended leaves behind, and how libSQL's
// write lock is bounded by the delivery's deadline.

const closing: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

const expired = () => new Error("expired");
const soon = () => Date.now() + 5_000;
const fn = () => undefined;

/** A file with the tables the tests write: `kept`, and `child` whose parent is checked at COMMIT. */
function schema(): string {
  return `create table kept (id text not null);
    create table parent (id text primary key);
    create table child (parent_id text references parent (id) deferrable initially deferred)`;
}

/** A better-sqlite3 connection to a new WAL file, its driver, and a second connection to read it. */
function syncSubject() {
  const file = databaseFile();
  const db = new Database(file);
  db.pragma("journal_mode = wal");
  db.pragma("foreign_keys = on");
  db.exec(schema());
  const other = new Database(file);
  closing.push(
    () => db.close(),
    () => other.close(),
  );
  const count = () => (other.prepare("select count(*) as n from kept").get() as { n: number }).n;
  return { db, other, driver: syncDriver(db, ""), count };
}

/**
 * A libSQL client on a new file, its driver (`wrap` may change the client it sees), and a second
 * libSQL client to read it and try its lock (libSQL's WAL lock is not seen by other SQLite builds:
 * better-sqlite3 takes BEGIN IMMEDIATE while a libSQL transaction holds it).
 */
async function asyncSubject(wrap: (client: SqliteAsyncClient) => SqliteAsyncClient = (client) => client) {
  const file = databaseFile();
  const client = createClient({ url: `file:${file}` });
  await client.execute("pragma journal_mode = wal");
  await client.executeMultiple(schema());
  // Per connection: the client's own, which its next transaction takes (the one the test begins first).
  await client.execute("pragma foreign_keys = on");
  const other = createClient({ url: `file:${file}` });
  await other.execute("pragma busy_timeout = 0");
  closing.push(
    () => client.close(),
    () => other.close(),
  );
  const count = async () => Number((await other.execute("select count(*) as n from kept")).rows[0]?.n);
  /** Whether another connection could take the write lock now (nothing of the inbox holds it). */
  const lockFree = async () => {
    try {
      // One call: the client runs both on one connection (a BEGIN alone would pin the next statement elsewhere).
      await other.executeMultiple("begin immediate; rollback");
      return true;
    } catch {
      return false;
    }
  };
  return { client, driver: asyncDriver(wrap(client as unknown as SqliteAsyncClient), "kept"), count, lockFree };
}

describe("which databases the drivers take, by shape", () => {
  it("a synchronous connection has prepare() and exec(); anything short of both is not one", () => {
    expect(isConnection({ prepare: fn, exec: fn })).toBe(true);
    expect(isConnection({ prepare: fn })).toBe(false);
    expect(isConnection({ exec: fn })).toBe(false);
    expect(isConnection({ prepare: "select 1", exec: fn })).toBe(false);
    expect(isConnection(null)).toBe(false);
    expect(isConnection(undefined)).toBe(false);
  });

  it("an asynchronous client has execute() and transaction(); anything short of both is not one", () => {
    expect(isAsyncClient({ execute: fn, transaction: fn })).toBe(true);
    expect(isAsyncClient({ execute: fn })).toBe(false);
    expect(isAsyncClient({ transaction: fn })).toBe(false);
    expect(isAsyncClient(null)).toBe(false);
    expect(isAsyncClient(undefined)).toBe(false);
  });
});

/** Ends `first`, begins the next transaction on the same driver, and ends `first` again both ways. */
async function endedThenNext(driver: InteractiveDriver, first: OpenTransaction): Promise<OpenTransaction> {
  await first.run("insert into kept (id) values (?)", ["first"]);
  await first.commit(soon(), expired);
  const next = await driver.begin(soon(), expired);
  await next.run("insert into kept (id) values (?)", ["next"]);
  // A late COMMIT or ROLLBACK of the ended transaction (a worker's cleanup after a COMMIT that
  // failed, say): the connection now holds the next one, which neither may end.
  await expect(first.commit(soon(), expired)).rejects.toMatchObject({
    message: "flag-webhooks: the inbox's transaction has already ended",
  });
  await first.rollback();
  return next;
}

describe("a transaction once it has ended, on one connection", () => {
  it("better-sqlite3: its commit() is refused and its rollback() does nothing; the next transaction commits its own rows", async () => {
    const { driver, count } = syncSubject();
    const next = await endedThenNext(driver, await driver.begin(soon(), expired));
    expect(await count()).toBe(1);
    await next.commit(soon(), expired);
    expect(await count()).toBe(2);
  });

  it("libSQL: its commit() is refused and its rollback() does nothing; the next transaction commits its own rows", async () => {
    const { driver, count } = await asyncSubject();
    const next = await endedThenNext(driver, await driver.begin(soon(), expired));
    expect(await count()).toBe(1);
    await next.commit(soon(), expired);
    expect(await count()).toBe(2);
  });
});

/**
 * A transaction whose handler ended it with a COMMIT past the savepoint that marks it, and (on a
 * synchronous connection; libSQL closes its transaction object at its COMMIT) began another.
 */
async function endedByHandler(driver: InteractiveDriver, beginAgain: boolean): Promise<unknown> {
  const open = await driver.begin(soon(), expired);
  await open.run("insert into kept (id) values (?)", ["before"]);
  await open.run("commit", []);
  if (beginAgain) {
    await open.run("begin", []);
    await open.run("insert into kept (id) values (?)", ["after"]);
  }
  return open.commit(soon(), expired).then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("a COMMIT that meets a transaction the handler ended", () => {
  for (const [name, subject, cause] of [
    ["better-sqlite3", async () => syncSubject(), /no such savepoint/],
    ["libSQL", () => asyncSubject(), /TRANSACTION_CLOSED/],
  ] as const) {
    it(`${name}: rejects, saying so, rolls back what came after, and gives the turn back`, async () => {
      const { driver, count } = await subject();
      const error = (await endedByHandler(driver, name === "better-sqlite3")) as Error;
      expect(error?.message).toBe(
        "flag-webhooks: the inbox's transaction was ended before its COMMIT (by the handler, a COMMIT or ROLLBACK through tx, or by SQLite after an error)",
      );
      expect(String((error.cause as Error)?.message)).toMatch(cause);
      // The handler's own COMMIT kept what came before it; what came after is rolled back.
      expect(await count()).toBe(1);
      const again = await driver.begin(Date.now() + 500, expired);
      await again.rollback();
    });
  }
});

describe("a COMMIT that fails (a deferred foreign key checked at COMMIT)", () => {
  for (const [name, subject] of [
    ["better-sqlite3", async () => syncSubject()],
    ["libSQL", () => asyncSubject()],
  ] as const) {
    it(`${name}: rejects with SQLite's error, rolls back, and the next transaction runs`, async () => {
      const { driver, count } = await subject();
      const open = await driver.begin(soon(), expired);
      await open.run("insert into kept (id) values (?)", ["orphan's"]);
      await open.run("insert into child (parent_id) values (?)", ["missing"]);
      await expect(open.commit(soon(), expired)).rejects.toMatchObject({
        message: expect.stringMatching(/FOREIGN KEY constraint failed/),
      });
      expect(await count()).toBe(0);
      const next = await driver.begin(Date.now() + 500, expired);
      await next.run("insert into kept (id) values (?)", ["next"]);
      await next.commit(soon(), expired);
      expect(await count()).toBe(1);
    });
  }
});

describe("committed(): a read of committed rows, made at once", () => {
  it("better-sqlite3: the rows, while no transaction of the inbox is open; undefined while one is", async () => {
    const { driver, other } = syncSubject();
    other.exec("insert into kept (id) values ('committed')");
    expect(driver.committed("select id from kept", [])).toEqual([{ id: "committed" }]);
    const open = await driver.begin(soon(), expired);
    expect(driver.committed("select id from kept", [])).toBeUndefined();
    await open.rollback();
    expect(driver.committed("select id from kept where id = ?", ["committed"])).toEqual([{ id: "committed" }]);
  });
});

/**
 * `client` whose transactions reach the inbox `ms` later (a slow pool, a server far away);
 * `locked` gets the promise of each one's first write (the lock probe) as it is sent.
 */
function slowTransactions(ms: number, locked: Promise<unknown>[] = []) {
  return (client: SqliteAsyncClient): SqliteAsyncClient =>
    ({
      protocol: "file",
      execute: (...args: Parameters<SqliteAsyncClient["execute"]>) => client.execute(...args),
      transaction: async (mode: Parameters<SqliteAsyncClient["transaction"]>[0]) => {
        const tx = (await client.transaction(mode)) as SqliteAsyncTransaction & {
          executeMultiple(sql: string): Promise<void>;
        };
        await new Promise((resolve) => setTimeout(resolve, ms));
        const executeMultiple = tx.executeMultiple.bind(tx);
        return Object.assign(tx, {
          executeMultiple: (sql: string) => {
            const sent = executeMultiple(sql);
            if (/where 0/.test(sql)) locked.push(sent);
            return sent;
          },
        });
      },
    }) as unknown as SqliteAsyncClient;
}

describe("libSQL's write lock, bounded by the delivery's deadline", () => {
  it("a transaction that comes within the deadline is the delivery's", async () => {
    const { driver, count } = await asyncSubject(slowTransactions(40));
    const open = await driver.begin(Date.now() + 2_000, expired);
    await open.run("insert into kept (id) values (?)", ["in time"]);
    await open.commit(soon(), expired);
    expect(await count()).toBe(1);
  });

  it("one that comes after it rejects the delivery, and is rolled back when it comes: the lock is free", async () => {
    const locked: Promise<unknown>[] = [];
    const { driver, lockFree } = await asyncSubject(slowTransactions(150, locked));
    await expect(driver.begin(Date.now() + 30, expired)).rejects.toMatchObject({ message: "expired" });
    // The late transaction takes the write lock when it comes, and is rolled back in the ticks after.
    while (locked.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await Promise.all(locked);
    for (let i = 0; i < 100 && !(await lockFree()); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await lockFree()).toBe(true);
  });

  it("a savepoint that fails after the lock is taken rejects the delivery, and gives the lock and the turn back", async () => {
    const { driver, lockFree } = await asyncSubject(
      (client) =>
        ({
          ...client,
          protocol: "file",
          execute: client.execute.bind(client),
          transaction: async (mode: Parameters<SqliteAsyncClient["transaction"]>[0]) => {
            const tx = await client.transaction(mode);
            const execute = tx.execute.bind(tx);
            return Object.assign(tx, {
              execute: (statement: Parameters<SqliteAsyncTransaction["execute"]>[0]) =>
                /^savepoint/.test(typeof statement === "string" ? statement : statement.sql)
                  ? Promise.reject(new Error("savepoint refused"))
                  : execute(statement),
            });
          },
        }) as unknown as SqliteAsyncClient,
    );
    await expect(driver.begin(soon(), expired)).rejects.toMatchObject({ message: "savepoint refused" });
    expect(await lockFree()).toBe(true);
    // The turn is free: the next begin is not kept waiting for the failed one (it fails the same way).
    await expect(driver.begin(Date.now() + 500, expired)).rejects.toMatchObject({ message: "savepoint refused" });
  });
});

describe("libSQL's COMMIT on a rollback journal, while another process reads the file", () => {
  // The reader holds its shared lock (a transaction that has read): COMMIT waits for it by trying
  // again after pauses, with SQLite's wait at 0 and the event loop free (SQLite's own wait would
  // stop it), and rolls back once the deadline passes. The reader is a process of its own: two
  // SQLite builds in one process do not see each other's locks.
  async function withReader() {
    const file = databaseFile();
    const client = createClient({ url: `file:${file}` });
    closing.push(() => client.close());
    await client.execute("pragma journal_mode = delete");
    await client.executeMultiple(schema());
    await client.execute("insert into kept (id) values ('first')");
    const script = `
      const db = new (require("better-sqlite3"))(process.argv[1]);
      db.exec("begin; select count(*) from kept");
      process.on("SIGTERM", () => { db.exec("rollback"); db.close(); process.exit(0); });
      process.stdout.write("reading\\n");
      setInterval(() => {}, 60000);`;
    const reader: Started = startProcess(process.execPath, ["-e", script, file], {
      cwd: resolve(import.meta.dirname, "../../.."),
    });
    closing.push(() => reader.kill());
    await untilPrinted("the process that reads the file", reader, "reading");
    const driver = asyncDriver(client as unknown as SqliteAsyncClient, "kept");
    const open = await driver.begin(soon(), expired);
    await open.run("insert into kept (id) values (?)", ["second"]);
    const count = async () => Number((await client.execute("select count(*) as n from kept")).rows[0]?.n);
    return { driver, open, count, leave: () => reader.stop() };
  }

  it("commits once the reader leaves", async () => {
    const { open, count, leave } = await withReader();
    const left = new Promise((resolve) => setTimeout(resolve, 100)).then(leave);
    await open.commit(soon(), expired);
    await left;
    expect(await count()).toBe(2);
  });

  it("rolls back when the reader stays past the deadline, and the next transaction commits", async () => {
    const { driver, open, count, leave } = await withReader();
    await expect(open.commit(Date.now() + 150, expired)).rejects.toMatchObject({ message: "expired" });
    await leave();
    expect(await count()).toBe(1);
    const next = await driver.begin(soon(), expired);
    await next.run("insert into kept (id) values (?)", ["next"]);
    await next.commit(soon(), expired);
    expect(await count()).toBe(2);
  });
});
