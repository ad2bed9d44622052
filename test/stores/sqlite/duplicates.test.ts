import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// Copies of one event id on SqliteInbox.handle() (better-sqlite3, a WAL file): a copy of an id
// already handled is answered from what is committed, without the connection's turn or the
// write lock (copies replayed at speed would otherwise each take the one writer's turn); a copy
// of an id still being handled on the connection waits for its turn, and is then a duplicate.

const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});

const DUPLICATE = { status: 204, headers: { "webhook-duplicate": "true" } };
const event = (id: string) => ({ id, type: "flag.updated" }) as WebhookEvent;

/** A connection on `file` in WAL mode, with the inbox's table and an effects table. */
async function connect(file: string): Promise<Database.Database> {
  const db = new Database(file);
  opened.push(db);
  db.pragma("journal_mode = wal");
  db.exec("create table if not exists effects (event_id text not null)");
  await new SqliteInbox(db, { scope: "setup" }).migrate();
  return db;
}
const effects = (db: Database.Database, id: string) =>
  (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n;

describe("SqliteInbox.handle(): copies of one id", () => {
  it("a copy of a handled id is a duplicate while another connection holds the write lock: answered from what is committed", async () => {
    const file = databaseFile();
    const db = await connect(file);
    const other = await connect(file);
    const onEvent = new SqliteInbox(db, { scope: "copies", timeout: 200 }).handle((e, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(e.id);
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent(event(id))).toBeUndefined();
    other.exec("begin immediate");
    try {
      expect(await onEvent(event(id))).toEqual(DUPLICATE);
      // A new id still needs the write lock: it waits for it, then answers 503.
      await expect(onEvent(event(`evt_${randomUUID()}`))).rejects.toMatchObject({ code: "store_unavailable" });
    } finally {
      other.exec("rollback");
    }
    expect(effects(db, id)).toBe(1);
  });

  it("a copy of an id still being handled on the connection waits for its turn, then is a duplicate; its handler ran once", async () => {
    const db = await connect(databaseFile());
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let entered = () => {};
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let runs = 0;
    const onEvent = new SqliteInbox(db, { scope: "in-flight" }).handle(async (e, tx) => {
      runs++;
      tx.prepare("insert into effects (event_id) values (?)").run(e.id);
      entered();
      await gate;
    });
    const id = `evt_${randomUUID()}`;
    const first = onEvent(event(id));
    await inHandler;
    // The first copy's row is in the connection's open transaction, uncommitted: not a duplicate yet.
    const copy = onEvent(event(id));
    open();
    expect(await first).toBeUndefined();
    expect(await copy).toEqual(DUPLICATE);
    expect([runs, effects(db, id)]).toEqual([1, 1]);
  });

  it("a copy whose first delivery rolled back is handled, not answered as a duplicate", async () => {
    const db = await connect(databaseFile());
    let fail = true;
    let entered = () => {};
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const onEvent = new SqliteInbox(db, { scope: "rolled-back" }).handle(async (e, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(e.id);
      if (fail) {
        fail = false;
        entered();
        await gate;
        throw new Error("fails once");
      }
    });
    const id = `evt_${randomUUID()}`;
    const first = onEvent(event(id));
    await inHandler;
    const copy = onEvent(event(id));
    open();
    await expect(first).rejects.toThrow("fails once");
    expect(await copy).toBeUndefined();
    expect(effects(db, id)).toBe(1);
  });
});
