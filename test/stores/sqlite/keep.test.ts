import { createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it, vi } from "vitest";
import { asyncDriver, type InteractiveDriver } from "../../../src/stores/sqlite/drivers.js";
import { positional, type SqliteTransactions, sqliteKeep } from "../../../src/stores/sqlite/keep.js";
import { databaseFile } from "../../support/sqlite.js";

// Keep-then-work's statements on SQLite (src/stores/sqlite/keep.ts): how a statement committed on
// its own reaches the file on each kind of driver, and what a failure or a lock held elsewhere
// does to it, seen from the delivery's answer and from the file. The flows of keep-then-work
// (kept, run, retried, parked) are in keep-then-work.test.ts.

const closing: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closing.splice(0)) await close();
});

const event = (id: string) => ({ id, type: "flag.updated", createdAt: "2026-11-28T00:00:00Z" }) as never;

/** A better-sqlite3 connection to `file` (closed after the file's tests), waiting `timeout` ms for a lock. */
function connect(file: string, timeout = 5_000): Database.Database {
  const db = new Database(file, { timeout });
  closing.push(() => db.close());
  return db;
}

/**
 * An app's trigger on the inbox's table, `before` `insert` or `update`, that fails the statement
 * (an error of the app, not a lock) the next `times` times; `tries` lists the ids it saw.
 */
function refusing(db: Database.Database, before: "insert" | "update", times: number) {
  const tries: string[] = [];
  let left = times;
  db.function("refuse_next", (id: unknown) => {
    tries.push(String(id));
    if (left-- > 0) throw new Error("refused by the app's trigger");
    return 0;
  });
  db.exec(`create trigger refuse_${before} before ${before} on flag_webhooks_inbox
    begin select refuse_next(new.id); end`);
  return tries;
}

describe("positional()", () => {
  it("binds each numbered parameter where it stands, from ?1 to ?10 and more, a value used twice bound twice", () => {
    const params = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
    expect(positional("select ?12, ?1, ?10, ?2, ?11, ?1", params)).toEqual({
      sql: "select ?, ?, ?, ?, ?, ?",
      params: ["l", "a", "j", "b", "k", "a"],
    });
    // And a database agrees: the statement's values come back in the order the SQL named them.
    const db = connect(databaseFile());
    const statement = positional("select ?10 as ten, ?2 as two, ?11 as eleven", params);
    expect(db.prepare(statement.sql).get(...statement.params)).toEqual({ ten: "j", two: "b", eleven: "k" });
  });
});

describe("keeping on a synchronous connection (better-sqlite3)", () => {
  it("a delivery alone is committed within the call itself: no promise, no timer, before anything else of the process runs", async () => {
    const file = databaseFile();
    const db = connect(file);
    db.pragma("journal_mode = wal");
    const inbox = new SqliteInbox(db, { scope: "at-once" });
    await inbox.migrate();
    const app = connect(file, 0);
    const count = () => app.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get("evt_now");
    const answer = inbox.enqueue()(event("evt_now"));
    // Read on another connection before this test awaits anything: the row is committed already.
    expect(count()).toEqual({ n: 1 });
    expect(await answer).toEqual({ status: 202 });
    expect(count()).toEqual({ n: 1 });
  });

  it("a delivery whose keep the app's trigger refuses is answered 503 with that cause, tried once, and kept on its retry", async () => {
    const db = connect(databaseFile());
    db.pragma("journal_mode = wal");
    const inbox = new SqliteInbox(db, { scope: "refused" });
    await inbox.migrate();
    const tries = refusing(db, "insert", 1);
    const enqueue = inbox.enqueue();
    await expect(enqueue(event("evt_refused"))).rejects.toMatchObject({
      code: "store_unavailable",
      message: expect.stringContaining("SQLite inbox"),
      cause: expect.objectContaining({ message: "refused by the app's trigger" }),
    });
    // Not tried again behind its answer: the 503 says the retry is the sender's.
    expect(tries).toEqual(["evt_refused"]);
    expect(await inbox.kept("evt_refused")).toBeUndefined();
    expect(await enqueue(event("evt_refused"))).toEqual({ status: 202 });
    expect(await inbox.kept("evt_refused")).toMatchObject({ state: "pending" });
  });

  it("replay() that the app's trigger refuses rejects with that cause and changes nothing", async () => {
    const db = connect(databaseFile());
    db.pragma("journal_mode = wal");
    const inbox = new SqliteInbox(db, { scope: "replay-refused" });
    await inbox.migrate();
    expect(await inbox.enqueue()(event("evt_replayed"))).toEqual({ status: 202 });
    const before = await inbox.kept("evt_replayed");
    refusing(db, "update", 1);
    await expect(inbox.replay("evt_replayed")).rejects.toMatchObject({
      code: "store_unavailable",
      message: expect.stringContaining("SQLite inbox"),
      cause: expect.objectContaining({ message: "refused by the app's trigger" }),
    });
    expect(await inbox.kept("evt_replayed")).toEqual(before);
    expect(await inbox.replay("evt_replayed")).toBe(1);
  });

  it("replay() while another connection holds the write lock past timeout rejects saying what it waited for", async () => {
    const file = databaseFile();
    const db = connect(file);
    db.pragma("journal_mode = wal");
    const inbox = new SqliteInbox(db, { scope: "replay-locked", timeout: 150 });
    await inbox.migrate();
    expect(await inbox.enqueue()(event("evt_locked"))).toEqual({ status: 202 });
    const other = connect(file, 0);
    other.exec("begin immediate");
    try {
      await expect(inbox.replay("evt_locked")).rejects.toMatchObject({
        code: "store_unavailable",
        cause: expect.objectContaining({ message: expect.stringMatching(/turn and the write lock within 150 ms/) }),
      });
    } finally {
      other.exec("rollback");
    }
    expect(await inbox.replay("evt_locked")).toBe(1);
  });

  it("on a rollback journal, a keep a reader keeps from its COMMIT leaves the file open to other readers while it waits", async () => {
    const file = databaseFile();
    const db = connect(file);
    db.pragma("journal_mode = delete");
    const inbox = new SqliteInbox(db, { scope: "readers", timeout: 10_000 });
    await inbox.migrate();
    const tries = refusing(db, "insert", 0);
    // A reader in a transaction: its shared lock keeps any COMMIT out until it ends.
    const reader = connect(file, 0);
    reader.exec("begin");
    reader.prepare("select count(*) from flag_webhooks_inbox").get();
    const answer = inbox.enqueue()(event("evt_waits"));
    // Kept, refused at COMMIT, then tried again: each try is rolled back whole, so between tries
    // the inbox holds no lock, and a COMMIT's pending lock never keeps new readers out.
    await vi.waitFor(() => expect(tries.length).toBeGreaterThanOrEqual(3), { timeout: 5_000, interval: 5 });
    const app = connect(file, 0);
    expect(app.prepare("select count(*) as n from flag_webhooks_inbox").get()).toEqual({ n: 0 });
    reader.exec("commit");
    expect(await answer).toEqual({ status: 202 });
    expect(app.prepare("select count(*) as n from flag_webhooks_inbox").get()).toEqual({ n: 1 });
  });
});

describe("keeping on an asynchronous client (@libsql/client, a local file)", () => {
  const expired = () => new Error("expired");
  const soon = () => Date.now() + 5_000;
  /** The inbox's transactions as sqliteKeep borrows them: its turn and lock, and its COMMIT. */
  const transactionsOf = (driver: InteractiveDriver): SqliteTransactions => ({
    begin: (deadline = soon()) => driver.begin(deadline, expired),
    commit: (open, deadline = soon()) => open.commit(deadline, expired),
  });

  it("a statement whose delivery was answered while it waited for the turn commits nothing, and the next one runs", async () => {
    const client = createClient({ url: `file:${databaseFile()}` });
    closing.push(() => client.close());
    await client.execute("create table kept (id text not null)");
    const driver = asyncDriver(client, "kept");
    const keep = sqliteKeep(transactionsOf(driver), driver, 5_000);
    const count = async () => Number((await client.execute("select count(*) as n from kept")).rows[0]?.n);
    // Another transaction of this connection has the turn (a handler running).
    const holder = await driver.begin(soon(), expired);
    let answered = false;
    const late = keep.query("insert into kept (id) values (?1) returning id", ["evt_late"], {
      deadline: soon(),
      abandoned: () => answered,
    });
    // Its delivery is answered 503 while it waits; then the turn comes free.
    answered = true;
    await holder.rollback();
    await expect(late).rejects.toThrow(/turn and the write lock/);
    expect(await count()).toBe(0);
    expect(await keep.query("insert into kept (id) values (?1) returning id", ["evt_next"])).toEqual([
      expect.objectContaining({ id: "evt_next" }),
    ]);
    expect(await count()).toBe(1);
  });

  it("a delivery whose keep the app's trigger refuses is answered 503, and the next delivery is kept", async () => {
    const client = createClient({ url: `file:${databaseFile()}` });
    closing.push(() => client.close());
    const inbox = new SqliteInbox(client, { scope: "refused", timeout: 2_000 });
    await inbox.migrate();
    await client.execute(`create trigger refuse_keep before insert on flag_webhooks_inbox
      when new.id like 'evt_refused%' begin select raise(abort, 'refused by the app''s trigger'); end`);
    const enqueue = inbox.enqueue();
    await expect(enqueue(event("evt_refused"))).rejects.toMatchObject({
      code: "store_unavailable",
      cause: expect.objectContaining({ message: expect.stringContaining("refused by the app's trigger") }),
    });
    // Its transaction was rolled back: the connection's turn and the write lock are free.
    expect(await enqueue(event("evt_after"))).toEqual({ status: 202 });
    expect(await inbox.kept("evt_refused")).toBeUndefined();
  });
});
