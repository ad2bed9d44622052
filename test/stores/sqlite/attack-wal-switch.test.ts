import { randomUUID } from "node:crypto";
import { monitorEventLoopDelay } from "node:perf_hooks";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { statusOf } from "../../support/deliveries.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on the one-statement write on WAL (BEGIN, a read of the data_version, the statement,
// COMMIT, no pragma): the journal mode was asked again only when the connection's data_version
// moved, on the claim that the app taking its file out of WAL on the inbox's connection moves it.
// It moves the first time only: on one connection, wal -> delete moves it (2 -> 3), delete -> wal
// moves it (3 -> 4), but a second wal -> delete leaves it (4 -> 4). The inbox then keeps a
// delivery as if on WAL in a file that has a rollback journal: its COMMIT waits for a reader's
// SHARED lock by the app's busy_timeout, with the event loop stopped, and the lone keep's try
// and `write`'s try each wait it out.

const APP_BUSY_TIMEOUT = 3210;
const TIMEOUT = 300;
const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});

async function setUp() {
  const file = databaseFile();
  const db = new Database(file);
  opened.push(db);
  db.pragma("journal_mode = wal");
  db.pragma(`busy_timeout = ${APP_BUSY_TIMEOUT}`);
  const inbox = new SqliteInbox(db, { scope: "switch", timeout: TIMEOUT });
  await inbox.migrate();
  const keep = inbox.enqueue();
  const deliver = (id = `evt_${randomUUID()}`) => statusOf(keep(createEvent("flag.updated", { id }) as WebhookEvent));
  const kept = (id: string) =>
    (db.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number }).n;
  return { file, db, deliver, kept };
}

/** One delivery while `file`'s reader holds its SHARED lock: its status, ms, the longest event-loop gap, kept. */
async function whileRead(run: Awaited<ReturnType<typeof setUp>>) {
  const reader = new Database(run.file);
  opened.push(reader);
  reader.exec("begin");
  reader.prepare("select count(*) from flag_webhooks_inbox").get();
  const gaps = monitorEventLoopDelay({ resolution: 5 });
  gaps.enable();
  await new Promise((turned) => setTimeout(turned, 20));
  const id = `evt_${randomUUID()}`;
  const began = performance.now();
  const answered = await run.deliver(id);
  const ms = Math.round(performance.now() - began);
  await new Promise((turned) => setTimeout(turned, 20));
  gaps.disable();
  reader.exec("rollback");
  reader.close();
  return { answered, ms, longestGap: Math.round(gaps.max / 1e6), kept: run.kept(id) };
}

describe("better-sqlite3 on WAL, the app switching its file's journal mode on the inbox's connection", () => {
  it("the data_version the inbox relies on does not move at a second wal -> delete", async () => {
    const { db } = await setUp();
    const version = () => db.prepare("pragma data_version").pluck().get();
    const seen: unknown[] = [version()];
    for (const mode of ["delete", "wal", "delete"]) {
      db.pragma(`journal_mode = ${mode}`);
      seen.push(version());
    }
    console.log(`data_version after wal, delete, wal, delete: ${seen.join(", ")}`);
    expect(seen[3]).toBe(seen[2]);
  });

  it("wal -> delete once, a reader held: 503 at timeout, the event loop never stopped", async () => {
    const run = await setUp();
    expect(await run.deliver()).toBe(202);
    run.db.pragma("journal_mode = delete");
    const seen = await whileRead(run);
    console.log(`wal -> delete, a reader held: ${JSON.stringify(seen)}`);
    expect(seen).toMatchObject({ answered: 503, kept: 0 });
    expect(seen.longestGap).toBeLessThan(APP_BUSY_TIMEOUT / 2);
  });

  // Was broken: wal -> delete -> wal -> delete with a delivery kept in each mode, then a reader
  // held: 503 after 6,437 ms (twice the app's 3,210 ms busy_timeout), the event loop stopped for
  // 6,442 ms, 1 of 1 (node:sqlite on Node 22 the same: 6,454 ms, 6,459 ms stopped). Fixed: the
  // journal mode is asked before each such write.
  it("wal -> delete -> wal -> delete, a reader held: 503 at timeout, the event loop never stopped", async () => {
    const run = await setUp();
    for (const mode of ["delete", "wal", "delete"]) {
      expect(await run.deliver()).toBe(202);
      run.db.pragma(`journal_mode = ${mode}`);
    }
    expect(await run.deliver()).toBe(202);
    const seen = await whileRead(run);
    console.log(`wal -> delete -> wal -> delete, a reader held: ${JSON.stringify(seen)}`);
    expect(seen).toMatchObject({ answered: 503, kept: 0 });
    expect(seen.longestGap).toBeLessThan(APP_BUSY_TIMEOUT / 2);
  });
});
