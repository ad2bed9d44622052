import { randomUUID } from "node:crypto";
import { monitorEventLoopDelay } from "node:perf_hooks";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { statusOf } from "../../support/deliveries.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on the one-statement write on WAL with the inbox's table in an ATTACHed database
// (`table: "aux.inbox"`): the journal mode and the data_version asked are aux's, and must stay
// right whatever the main database's mode, and whatever file the app attaches as aux. What must
// hold, a lock held on aux by another connection: 503 once `timeout` passed, the event loop
// never stopped for the app's busy_timeout, nothing kept, then 202.

const APP_BUSY_TIMEOUT = 3210;
const TIMEOUT = 300;
const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});
const connect = (file: string) => {
  const db = new Database(file);
  opened.push(db);
  return db;
};

/** The app's connection in `main` mode, `aux` attached in `aux` mode, the inbox on aux.inbox. */
async function setUp(main: "wal" | "delete", aux: "wal" | "delete") {
  const db = connect(databaseFile());
  db.pragma(`journal_mode = ${main}`);
  db.pragma(`busy_timeout = ${APP_BUSY_TIMEOUT}`);
  const auxFile = databaseFile("aux.db");
  db.exec(`attach database '${auxFile}' as aux`);
  db.pragma(`aux.journal_mode = ${aux}`);
  const inbox = new SqliteInbox(db, { scope: "attached", timeout: TIMEOUT, table: "aux.inbox" });
  await inbox.migrate();
  const keep = inbox.enqueue();
  const deliver = (id = `evt_${randomUUID()}`) => statusOf(keep(createEvent("flag.updated", { id }) as WebhookEvent));
  return { db, auxFile, deliver };
}

/** One delivery while `lock` holds a lock on `file` (another connection): status, longest gap, kept. */
async function whileLocked(run: Awaited<ReturnType<typeof setUp>>, file: string, lock: "reader" | "writer") {
  const other = connect(file);
  if (lock === "writer") other.exec("begin immediate");
  else {
    other.exec("begin");
    other.prepare("select count(*) from sqlite_schema").get();
  }
  const gaps = monitorEventLoopDelay({ resolution: 5 });
  gaps.enable();
  await new Promise((turned) => setTimeout(turned, 20));
  const id = `evt_${randomUUID()}`;
  const answered = await run.deliver(id);
  await new Promise((turned) => setTimeout(turned, 20));
  gaps.disable();
  other.exec("rollback");
  other.close();
  const kept = (run.db.prepare("select count(*) as n from aux.inbox where id = ?").get(id) as { n: number }).n;
  return { answered, longestGap: Math.round(gaps.max / 1e6), kept };
}

function expectHeld(seen: { answered: number; longestGap: number; kept: number }) {
  expect(seen).toMatchObject({ answered: 503, kept: 0 });
  expect(seen.longestGap).toBeLessThan(APP_BUSY_TIMEOUT / 2);
}

describe("better-sqlite3, the inbox's table in an attached database", () => {
  it("main on WAL, aux on a rollback journal, a reader of aux held: 503, the loop free", async () => {
    const run = await setUp("wal", "delete");
    expect(await run.deliver()).toBe(202);
    const seen = await whileLocked(run, run.auxFile, "reader");
    console.log(`main wal, aux delete, reader held: ${JSON.stringify(seen)}`);
    expectHeld(seen);
    expect(await run.deliver()).toBe(202);
  });

  it("main on a rollback journal, aux on WAL, aux's write lock held: 503, the loop free", async () => {
    const run = await setUp("delete", "wal");
    expect(await run.deliver()).toBe(202);
    const seen = await whileLocked(run, run.auxFile, "writer");
    console.log(`main delete, aux wal, writer held: ${JSON.stringify(seen)}`);
    expectHeld(seen);
    expect(await run.deliver()).toBe(202);
  });

  it("aux on WAL, the app attaches another file in a rollback journal as aux, a reader of it held: 503, the loop free", async () => {
    const run = await setUp("wal", "wal");
    expect(await run.deliver()).toBe(202);
    // The second file made ready by a connection of its own: the inbox's connection runs no
    // statement on it before the next delivery but ATTACH.
    const second = databaseFile("aux2.db");
    const maker = connect(second);
    maker.pragma("journal_mode = delete");
    await new SqliteInbox(maker, { scope: "attached", table: "inbox" }).migrate();
    maker.close();
    run.db.exec("detach database aux");
    run.db.exec(`attach database '${second}' as aux`);
    const between = await run.deliver();
    const seen = await whileLocked(run, second, "reader");
    console.log(`aux re-attached in delete: ${between}, then a reader held: ${JSON.stringify(seen)}`);
    expect(between).toBe(202);
    expectHeld(seen);
  });
});
