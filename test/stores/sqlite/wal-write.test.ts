import { randomUUID } from "node:crypto";
import { monitorEventLoopDelay } from "node:perf_hooks";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// A delivery kept alone on a synchronous connection, on WAL: the journal mode asked, then BEGIN, a
// read, the statement, COMMIT, with the app's busy_timeout untouched (SQLite waits by it only to
// begin a transaction from none, and the read begins it; on WAL a read waits for no lock). What
// must hold: no statement that sets the busy_timeout; on a rollback journal (also once the app
// took the file out of WAL, however often it switched), the busy_timeout at 0;
// and whatever another connection holds, the event loop never stops for the app's busy_timeout,
// 503 once `timeout` passed, nothing kept.

const APP_BUSY_TIMEOUT = 3210;
const TIMEOUT = 300;

describe("better-sqlite3: one delivery kept alone", () => {
  const opened: Database.Database[] = [];
  afterAll(() => {
    for (const db of opened) if (db.open) db.close();
  });

  /** The app's connection (every statement it runs logged), its inbox and enqueue(), on a file in `journal` mode. */
  async function setUp(journal: "wal" | "delete", table?: string) {
    const file = databaseFile();
    const logged: string[] = [];
    const db = new Database(file, { verbose: (sql) => void logged.push(String(sql)) });
    opened.push(db);
    db.pragma(`journal_mode = ${journal}`);
    db.pragma(`busy_timeout = ${APP_BUSY_TIMEOUT}`);
    const inbox = new SqliteInbox(db, { scope: "alone", timeout: TIMEOUT, ...(table ? { table } : {}) });
    const keep = inbox.enqueue();
    const status = async (id: string) => {
      try {
        const reply = (await keep(createEvent("flag.updated", { id }) as WebhookEvent)) as
          | { status?: number }
          | undefined;
        return reply?.status ?? 204;
      } catch (error) {
        return (error as { status?: number }).status ?? 500;
      }
    };
    /** A connection of its own to the file (not logged). */
    const other = () => {
      const connection = new Database(file);
      opened.push(connection);
      return connection;
    };
    return { db, file, inbox, logged, status, other };
  }

  /** The statements one delivery's keep runs, once a first delivery prepared them. */
  async function statementsOfOne(journal: "wal" | "delete") {
    const { inbox, logged, status } = await setUp(journal);
    await inbox.migrate();
    expect(await status(`evt_${randomUUID()}`)).toBe(202);
    logged.length = 0;
    expect(await status(`evt_${randomUUID()}`)).toBe(202);
    return logged.map((sql) => sql.replace(/\s+/g, " ").trim());
  }

  // Broken before (the busy_timeout set to 0 and back around BEGIN IMMEDIATE and COMMIT): 5
  // statements, two of them `pragma busy_timeout = …`, which SQLite compiles at each run, and a
  // third reading it ("pragma busy_timeout"), also compiled again at each run.
  it("on WAL: the journal mode asked, BEGIN, the data_version read, the INSERT, COMMIT; no busy_timeout read or set", async () => {
    const statements = await statementsOfOne("wal");
    expect(statements.map((sql) => sql.split(" ").slice(0, 2).join(" "))).toEqual([
      "pragma journal_mode",
      "begin",
      "pragma data_version",
      "insert into",
      "commit",
    ]);
  });

  it("on WAL, after another connection committed: the journal mode asked once per write, the busy_timeout never", async () => {
    const { inbox, logged, status, other } = await setUp("wal");
    await inbox.migrate();
    expect(await status(`evt_${randomUUID()}`)).toBe(202);
    other().exec("create table app (x integer)");
    logged.length = 0;
    expect(await status(`evt_${randomUUID()}`)).toBe(202);
    expect(await status(`evt_${randomUUID()}`)).toBe(202);
    expect(logged.filter((sql) => /journal_mode/.test(sql))).toEqual(["pragma journal_mode", "pragma journal_mode"]);
    expect(logged.filter((sql) => /busy_timeout/.test(sql))).toEqual([]);
  });

  it("on a rollback journal: the busy_timeout at 0 for BEGIN IMMEDIATE and COMMIT, the app's put back", async () => {
    const statements = await statementsOfOne("delete");
    expect(statements).toContain("pragma busy_timeout = 0;");
    expect(statements).toContain("begin immediate");
    expect(statements).toContain(`pragma busy_timeout = ${APP_BUSY_TIMEOUT}`);
  });

  /** Keeps one delivery (a lock held elsewhere): its status, the longest event-loop gap, whether it was kept, the app's busy_timeout after. */
  async function whileHeld(run: Awaited<ReturnType<typeof setUp>>, table = "flag_webhooks_inbox") {
    const id = `evt_${randomUUID()}`;
    const gaps = monitorEventLoopDelay({ resolution: 5 });
    gaps.enable();
    // A turn of the event loop before and after: the histogram measures from its first sample,
    // and the delivery's synchronous steps (in microtasks, no timer run between them) end in one.
    await new Promise((turned) => setTimeout(turned, 20));
    const answered = await run.status(id);
    await new Promise((turned) => setTimeout(turned, 20));
    gaps.disable();
    const kept = (run.db.prepare(`select count(*) as n from ${table} where id = ?`).get(id) as { n: number }).n;
    return {
      answered,
      longestGap: Math.round(gaps.max / 1e6),
      kept,
      busyTimeout: run.db.pragma("busy_timeout", { simple: true }),
    };
  }

  // What a journal mode remembered from the first write would get wrong: the app takes its file
  // out of WAL on the inbox's connection (it may, while no other connection has the file open),
  // then a reader holds its SHARED lock; a rollback journal's COMMIT waits for it by the app's
  // busy_timeout, with the event loop stopped. Asked at each write, the busy_timeout is 0 there.
  it("WAL, then the app switches the file to a rollback journal: a reader held, 503 without stopping the event loop", async () => {
    const run = await setUp("wal");
    await run.inbox.migrate();
    expect(await run.status(`evt_${randomUUID()}`)).toBe(202);
    expect(run.db.pragma("journal_mode = delete", { simple: true })).toBe("delete");
    const reader = run.other();
    reader.exec("begin");
    reader.prepare("select count(*) from flag_webhooks_inbox").get();
    const seen = await whileHeld(run);
    reader.exec("rollback");
    console.log(`out of WAL, a reader held: ${seen.answered}, longest event-loop gap ${seen.longestGap} ms`);
    expect(seen).toMatchObject({ answered: 503, kept: 0, busyTimeout: APP_BUSY_TIMEOUT });
    expect(seen.longestGap).toBeLessThan(APP_BUSY_TIMEOUT / 2);
    expect(await run.status(`evt_${randomUUID()}`)).toBe(202);
  });

  // The read that begins the transaction must be of the inbox's own database: a write to an
  // attached database with no transaction of its own would wait for its lock by the busy_timeout.
  it("WAL, the inbox's table in an attached database whose write lock another connection holds: 503 without stopping the event loop", async () => {
    const aux = databaseFile("aux.db");
    const run = await setUp("wal", "aux.inbox");
    run.db.exec(`attach database '${aux}' as aux`);
    run.db.pragma("aux.journal_mode = wal");
    await run.inbox.migrate();
    expect(await run.status(`evt_${randomUUID()}`)).toBe(202);
    const writer = new Database(aux);
    opened.push(writer);
    writer.exec("begin immediate");
    const seen = await whileHeld(run, "aux.inbox");
    writer.exec("rollback");
    console.log(`attached, its write lock held: ${seen.answered}, longest event-loop gap ${seen.longestGap} ms`);
    expect(seen).toMatchObject({ answered: 503, kept: 0, busyTimeout: APP_BUSY_TIMEOUT });
    expect(seen.longestGap).toBeLessThan(APP_BUSY_TIMEOUT / 2);
    expect(await run.status(`evt_${randomUUID()}`)).toBe(202);
  });

  it("WAL, another connection holds the write lock: 503 once timeout passed, without stopping the event loop; then 202", async () => {
    const run = await setUp("wal");
    await run.inbox.migrate();
    const writer = run.other();
    writer.exec("begin immediate");
    const began = performance.now();
    const seen = await whileHeld(run);
    const after = performance.now() - began;
    writer.exec("rollback");
    expect(seen).toMatchObject({ answered: 503, kept: 0, busyTimeout: APP_BUSY_TIMEOUT });
    expect(after).toBeGreaterThanOrEqual(TIMEOUT - 5);
    expect(seen.longestGap).toBeLessThan(APP_BUSY_TIMEOUT / 2);
    expect(await run.status(`evt_${randomUUID()}`)).toBe(202);
  });
});
