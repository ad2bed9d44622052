import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { statusOf } from "../../support/deliveries.js";
import { holdWriteLock } from "../../support/lock-holder.js";
import { committedIn, databaseFile } from "../../support/sqlite.js";

// Attack on keepOn, a second connection given to the inbox for enqueue() alone: a keep there is
// one autocommitted statement with the busy_timeout at 0. Whatever lock another connection or
// process holds, in WAL or with a rollback journal, a 202 must mean a committed row, anything else
// keeps nothing, and the event loop never stops for the app's busy_timeout (5 s here).

const APP = 5000;
const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});
const eventOf = (id: string) => createEvent("flag.updated", { id }) as WebhookEvent;
const newId = () => `evt_${randomUUID()}`;

function connect(file: string): Database.Database {
  const db = new Database(file, { timeout: APP });
  opened.push(db);
  return db;
}

async function setUp(mode: "wal" | "delete") {
  const file = databaseFile();
  const db = connect(file);
  db.pragma(`journal_mode = ${mode}`);
  const second = connect(file);
  const inbox = new SqliteInbox(db, { scope: "keep-on", timeout: "300ms", keepOn: second });
  await inbox.migrate();
  const committed = committedIn(file);
  return { file, db, second, inbox, keep: inbox.enqueue(), committed };
}

/** The answer to `deliver()` and the longest the event loop stopped meanwhile, in ms (a lone keep runs in the call). */
async function watched(deliver: () => Promise<unknown>) {
  let last = Date.now();
  let longest = 0;
  const ticks = setInterval(() => {
    longest = Math.max(longest, Date.now() - last);
    last = Date.now();
  }, 5);
  try {
    const called = Date.now();
    const delivery = deliver();
    // The call itself: a lone keep that waited by the busy_timeout would stop the loop in it.
    longest = Math.max(longest, Date.now() - called);
    return { status: await statusOf(delivery), stopped: longest };
  } finally {
    clearInterval(ticks);
  }
}

describe("keepOn, a connection of the inbox's own for enqueue()", () => {
  it("keeps on it, committed, with its busy_timeout at 0 and the app's connection left as it was", async () => {
    const { db, second, keep, committed } = await setUp("wal");
    const id = newId();
    expect(await statusOf(keep(eventOf(id)))).toBe(202);
    expect(committed(id)).toBe(true);
    expect(second.pragma("busy_timeout", { simple: true })).toBe(0);
    expect(db.pragma("busy_timeout", { simple: true })).toBe(APP);
    // A copy is a duplicate, as without the option.
    expect(await statusOf(keep(eventOf(id)))).toBe(204);
  });

  for (const mode of ["wal", "delete"] as const) {
    it(`${mode}: the app's write transaction open: 503 past the bound, the event loop free, nothing kept`, async () => {
      const { db, second, keep, committed } = await setUp(mode);
      db.exec("begin immediate");
      const id = newId();
      const { status, stopped } = await watched(() => keep(eventOf(id)));
      db.exec("rollback");
      expect({ status, kept: committed(id), open: second.inTransaction }).toEqual({
        status: 503,
        kept: false,
        open: false,
      });
      expect(stopped).toBeLessThan(APP / 2);
      expect(await statusOf(keep(eventOf(id)))).toBe(202);
    });

    it(`${mode}: another process's BEGIN IMMEDIATE let go within the bound: waited for, then kept`, async () => {
      const { file, keep, committed } = await setUp(mode);
      const holder = await holdWriteLock(file, 100);
      try {
        const id = newId();
        const { status, stopped } = await watched(() => keep(eventOf(id)));
        expect({ status, kept: committed(id) }).toEqual({ status: 202, kept: true });
        expect(stopped).toBeLessThan(APP / 2);
      } finally {
        await holder.stop();
      }
    });
  }

  it("delete: a reader held on the app's connection fails the keep's COMMIT at once: rolled back, 503, then kept", async () => {
    const { db, second, keep, committed } = await setUp("delete");
    db.exec("begin");
    db.prepare("select count(*) from flag_webhooks_inbox").get();
    const id = newId();
    const { status, stopped } = await watched(() => keep(eventOf(id)));
    db.exec("commit");
    expect({ status, kept: committed(id), open: second.inTransaction }).toEqual({
      status: 503,
      kept: false,
      open: false,
    });
    expect(stopped).toBeLessThan(APP / 2);
    expect(await statusOf(keep(eventOf(id)))).toBe(202);
  });

  it("a transaction left open on it against its terms: 503, never joined", async () => {
    const { second, keep, committed } = await setUp("wal");
    second.exec("begin");
    const id = newId();
    const failure = await keep(eventOf(id)).catch((error: unknown) => error);
    // The 503 says why: the connection is the inbox's own, and the app's transaction is open on it.
    expect((failure as { cause?: { message?: string } }).cause?.message).toBe(
      'flag-webhooks: a transaction is open on the "keepOn" connection, which is the inbox\'s own',
    );
    const status = await statusOf(Promise.reject(failure));
    const joined = second.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as {
      n: number;
    };
    second.exec("rollback");
    expect({ status, joined: joined.n, kept: committed(id) }).toEqual({ status: 503, joined: 0, kept: false });
  });

  it("deliveries at once: a group's COMMIT on it keeps each, one 202 each", async () => {
    const { keep, committed } = await setUp("wal");
    const ids = Array.from({ length: 20 }, newId);
    const statuses = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
    expect(statuses).toEqual(ids.map(() => 202));
    expect(ids.filter(committed)).toEqual(ids);
  });

  it("refuses the inbox's connection, another file, :memory:, and what is no synchronous connection", () => {
    const file = databaseFile();
    const db = connect(file);
    const other = connect(databaseFile("other.db"));
    const memory = connect(":memory:");
    const inboxOf = (on: unknown, keepOn: unknown) => () =>
      new SqliteInbox(on as Database.Database, { scope: "keep-on", keepOn: keepOn as Database.Database });
    expect(inboxOf(db, db)).toThrow(TypeError);
    expect(inboxOf(db, other)).toThrow(/inbox's own file/);
    expect(inboxOf(memory, connect(":memory:"))).toThrow(/none: an in-memory or temporary database/);
    expect(inboxOf(db, other)).toThrow(`(${file})`);
    // A table in a database attached on neither: no file to compare.
    expect(() => new SqliteInbox(db, { scope: "keep-on", table: "nowhere.inbox", keepOn: connect(file) })).toThrow(
      /inbox's own file/,
    );
    expect(inboxOf(db, { execute: () => undefined })).toThrow(TypeError);
    // Beside a database that is no synchronous connection: a libSQL client, a D1 binding.
    const client = { execute: async () => ({ rows: [] }), transaction: async () => ({}) };
    expect(inboxOf(client, connect(file))).toThrow(/second synchronous connection/);
    const d1 = { prepare: () => ({ bind: () => undefined }), batch: async () => [] };
    expect(inboxOf(d1, connect(file))).toThrow(/second synchronous connection/);
    expect(() => inboxOf(db, connect(file))()).not.toThrow();
  });

  it("a table in an attached database: the file of that database is the one compared", async () => {
    const main = databaseFile();
    const audit = databaseFile("audit.db");
    const db = connect(main);
    db.exec(`attach database '${audit}' as audit`);
    const second = connect(databaseFile("elsewhere.db"));
    const make = () => new SqliteInbox(db, { scope: "keep-on", table: "audit.inbox", keepOn: second });
    expect(make).toThrow(/inbox's own file/);
    second.exec(`attach database '${audit}' as audit`);
    const inbox = make();
    await inbox.migrate();
    expect(await statusOf(inbox.enqueue()(eventOf(newId())))).toBe(202);
  });
});
