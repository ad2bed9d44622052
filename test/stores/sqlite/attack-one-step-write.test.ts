import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@libsql/client";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { statusOf } from "../../support/deliveries.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on the SQLite one-step write (BEGIN IMMEDIATE, the INSERT and COMMIT in one synchronous
// step, the busy_timeout at 0 inside the same exec as BEGIN and as COMMIT): whatever fails, the
// app's own busy_timeout must come back, a transaction the app left open must never receive the
// inbox's row, and a 202 must mean the row is committed.

const APP_BUSY_TIMEOUT = 3210;
const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});

function open(file: string, journal: "wal" | "delete"): Database.Database {
  const db = new Database(file);
  db.pragma(`journal_mode = ${journal}`);
  db.pragma(`busy_timeout = ${APP_BUSY_TIMEOUT}`);
  opened.push(db);
  return db;
}

const busyTimeout = (db: Database.Database) => db.pragma("busy_timeout", { simple: true });
const eventOf = (id: string) => createEvent("flag.updated", { id }) as WebhookEvent;
const newId = () => `evt_${randomUUID()}`;
const committedIds = (file: string) => {
  const reader = new Database(file, { readonly: true });
  try {
    return (reader.prepare("select id from flag_webhooks_inbox").all() as { id: string }[]).map((row) => row.id);
  } finally {
    reader.close();
  }
};

describe.each(["wal", "delete"] as const)("SQLite one-step write, journal_mode=%s", (journal) => {
  async function setUp() {
    const file = databaseFile();
    const db = open(file, journal);
    const inbox = new SqliteInbox(db, { scope: "attack", timeout: "400ms" });
    await inbox.migrate();
    db.exec("create table app (v text)");
    return { file, db, inbox };
  }

  it("a transaction the app left open on the inbox's connection: never joined, answered 503, busy_timeout back", async () => {
    const { file, db, inbox } = await setUp();
    const keep = inbox.enqueue();
    db.exec("begin; insert into app values ('mine')");
    const ids = Array.from({ length: 5 }, newId);
    const statuses = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
    expect(db.inTransaction).toBe(true);
    expect(busyTimeout(db)).toBe(APP_BUSY_TIMEOUT);
    db.exec("rollback");
    const kept = committedIds(file);
    // Each 202 is a committed row that the app's rollback did not take; each other answer a 503.
    for (const [i, id] of ids.entries()) {
      expect([202, 503]).toContain(statuses[i]);
      expect(kept.includes(id)).toBe(statuses[i] === 202);
    }
    expect(await statusOf(keep(eventOf(newId())))).toBe(202);
    expect(busyTimeout(db)).toBe(APP_BUSY_TIMEOUT);
  });

  it("another connection holding the write lock past the timeout: 503, busy_timeout back, then each kept once", async () => {
    const { file, db, inbox } = await setUp();
    const other = open(file, journal);
    const keep = inbox.enqueue();
    other.exec("begin immediate");
    const ids = Array.from({ length: 6 }, newId);
    const statuses = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
    expect(statuses).toEqual(ids.map(() => 503));
    expect(busyTimeout(db)).toBe(APP_BUSY_TIMEOUT);
    other.exec("rollback");
    // The sender's retries: each id kept once, and now, since nothing of a 503 was kept: each a 202.
    const again = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
    expect(again).toEqual(ids.map(() => 202));
    expect(committedIds(file).sort()).toEqual([...ids].sort());
    expect(busyTimeout(db)).toBe(APP_BUSY_TIMEOUT);
  });

  it("a reader holding the file while the COMMIT needs it (rollback journal) or a writer released mid-wait", async () => {
    const { file, db, inbox } = await setUp();
    const reader = open(file, journal);
    const keep = inbox.enqueue();
    // A read transaction: on a rollback journal a COMMIT cannot write past it; in WAL it can.
    reader.exec("begin; select count(*) from flag_webhooks_inbox");
    reader.prepare("select count(*) from flag_webhooks_inbox").get();
    const ids = Array.from({ length: 6 }, newId);
    const answers = ids.map((id) => statusOf(keep(eventOf(id))));
    await sleep(150);
    reader.exec("commit");
    const statuses = await Promise.all(answers);
    const kept = committedIds(file);
    for (const [i, id] of ids.entries()) expect(kept.includes(id)).toBe(statuses[i] === 202);
    expect(busyTimeout(db)).toBe(APP_BUSY_TIMEOUT);
    // Each id kept once: the sender's retries of any 503 keep it now, and copies are copies.
    const again = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
    for (const [i] of ids.entries()) expect(again[i]).toBe(statuses[i] === 202 ? 204 : 202);
    expect(new Set(committedIds(file)).size).toBe(ids.length);
  });

  it("a statement that fails mid-step (a trigger refusing one row of a batch): only it 503, busy_timeout back", async () => {
    const { file, db, inbox } = await setUp();
    db.exec(`create trigger refuse after insert on flag_webhooks_inbox when new.id like 'evt_refused%'
      begin select raise(abort, 'refused'); end`);
    const keep = inbox.enqueue();
    const ids = [newId(), newId(), `evt_refused_${randomUUID()}`, newId(), newId()];
    const statuses = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
    expect(statuses).toEqual(ids.map((id) => (id.startsWith("evt_refused") ? 503 : 202)));
    expect(db.inTransaction).toBe(false);
    expect(busyTimeout(db)).toBe(APP_BUSY_TIMEOUT);
    expect(committedIds(file).sort()).toEqual(ids.filter((id) => !id.startsWith("evt_refused")).sort());
  });
});

describe("SQLite over @libsql/client (a local file): the app's busy_timeout", () => {
  // The async driver sets the client's busy_timeout to what is left of the inbox's deadline for
  // BEGIN and COMMIT (so SQLite waits for a lock no longer than the inbox may) and puts the app's
  // own back after each: before, the app's 3210 ms read 5000 after one enqueue(), and 57 ms after
  // one that waited 950 ms for its turn, and the app's own writes then gave up on a lock that soon.
  it("after migrate(), enqueue(), handle() and a worker's attempt, the app's busy_timeout is its own again", async () => {
    const client = createClient({ url: `file:${databaseFile()}` });
    try {
      const setting = async () => Number((await client.execute("pragma busy_timeout")).rows[0]?.timeout);
      await client.execute(`pragma busy_timeout = ${APP_BUSY_TIMEOUT}`);
      const inbox = new SqliteInbox(client, { scope: "libsql-busy" });
      const seen: number[] = [];
      await inbox.migrate();
      seen.push(await setting());
      await statusOf(inbox.enqueue()(eventOf(newId())));
      seen.push(await setting());
      await statusOf(inbox.handle(async () => {})(eventOf(newId())));
      seen.push(await setting());
      const worker = inbox.work(() => {}, { interval: false });
      await worker.drain();
      await worker.close();
      seen.push(await setting());
      expect(seen).toEqual([APP_BUSY_TIMEOUT, APP_BUSY_TIMEOUT, APP_BUSY_TIMEOUT, APP_BUSY_TIMEOUT]);
    } finally {
      client.close();
    }
  });

  it("after an enqueue() that waited for its turn, and after one refused the lock: the app's own again", async () => {
    const file = databaseFile();
    const client = createClient({ url: `file:${file}` });
    const other = createClient({ url: `file:${file}` });
    try {
      const setting = async () => Number((await client.execute("pragma busy_timeout")).rows[0]?.timeout);
      await client.execute(`pragma busy_timeout = ${APP_BUSY_TIMEOUT}`);
      const inbox = new SqliteInbox(client, { scope: "libsql-busy", timeout: "1s" });
      await inbox.migrate();
      const keep = inbox.enqueue();
      // A handle() holding the turn while an enqueue() waits for it: the enqueue() leaves the
      // app's busy_timeout, not what was left of its own deadline.
      const handled = statusOf(inbox.handle(() => sleep(300))(eventOf(newId())));
      const waited = statusOf(keep(eventOf(newId())));
      expect([await handled, await waited]).toEqual([204, 202]);
      expect(await setting()).toBe(APP_BUSY_TIMEOUT);
      // Another client holding the write lock past the timeout: 503, and the app's own again (the
      // connection whose BEGIN failed then refuses savepoints until libSQL's failed statement is
      // garbage-collected, as docs/sqlite.md says: the next deliveries are not asserted here).
      const holder = await other.transaction("write");
      const refused = await statusOf(keep(eventOf(newId())));
      await holder.rollback();
      expect(refused).toBe(503);
      expect(await setting()).toBe(APP_BUSY_TIMEOUT);
    } finally {
      client.close();
      other.close();
    }
  });
});
