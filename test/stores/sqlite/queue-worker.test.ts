import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { WebhookError, type WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// inbox.handle(fn) called directly, with no receiver delivering the event (a queue worker): the
// inbox commits when fn resolves and rolls back when it throws or when COMMIT fails, never leaving
// its transaction open, and runs fn once per event however many calls race.

const dbs: Database.Database[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
});

function open(file: string, journal = "wal"): Database.Database {
  const db = new Database(file);
  db.pragma(`journal_mode = ${journal}`);
  db.exec("create table if not exists effects (event_id text not null)");
  dbs.push(db);
  return db;
}

function effects(db: Database.Database): string[] {
  return (db.prepare("select event_id from effects order by rowid").all() as { event_id: string }[]).map(
    (row) => row.event_id,
  );
}

async function worker(db: Database.Database, scope: string, fail: () => boolean = () => false) {
  const inbox = new SqliteInbox(db, { scope, timeout: "1s" });
  await inbox.migrate();
  let runs = 0;
  const handle = inbox.handle(async (event: WebhookEvent, tx) => {
    runs++;
    tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    await sleep(30);
    if (fail()) throw new Error("the worker's handler failed");
  });
  return { handle, runs: () => runs };
}

describe("SqliteInbox.handle(fn) called by a queue worker, no receiver", () => {
  it("fn throws: the call rejects with its error, the writes are rolled back, the next call runs it once", async () => {
    const db = open(databaseFile());
    let failing = true;
    const { handle, runs } = await worker(db, "worker-throws", () => failing);
    const event = createEvent("flag.updated");
    await expect(handle(event)).rejects.toThrow("the worker's handler failed");
    expect([effects(db), db.inTransaction]).toEqual([[], false]);
    failing = false;
    expect(await handle(event)).toBeUndefined();
    expect(await handle(event)).toMatchObject({ status: 204 });
    expect([effects(db), runs(), db.inTransaction]).toEqual([[event.id], 2, false]);
  });

  it("COMMIT fails (a reader holds the rollback journal's lock): 503 store_unavailable within the inbox's timeout, the event loop free meanwhile; rolled back, not left open; then once", async () => {
    const file = databaseFile();
    // better-sqlite3's own busy_timeout (5 s) is left as it is, as an app leaves it.
    const db = open(file, "delete");
    const reader = open(file, "delete");
    const { handle, runs } = await worker(db, "worker-commit-fails");
    const event = createEvent("flag.updated");
    reader.exec("begin");
    reader.prepare("select count(*) from effects").get();
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 50);
    const began = Date.now();
    const failed = await handle(event).catch((error: unknown) => error);
    const took = Date.now() - began;
    clearInterval(ticker);
    reader.exec("commit");
    // The inbox's timeout is 1 s: COMMIT waits for the reader no longer, and not with the process stopped.
    expect(took).toBeLessThan(2000);
    expect(ticks).toBeGreaterThan(5);
    expect(failed).toBeInstanceOf(WebhookError);
    expect((failed as WebhookError).code).toBe("store_unavailable");
    expect((failed as WebhookError).message).toBe("the SQLite inbox is unavailable; retry later");
    expect(((failed as WebhookError).cause as Error).message).toBe(
      "SQLite did not let the inbox commit within 1000 ms",
    );
    expect([effects(db), db.inTransaction]).toEqual([[], false]);
    expect(await handle(event)).toBeUndefined();
    expect(await handle(event)).toMatchObject({ status: 204 });
    expect([effects(db), runs()]).toEqual([[event.id], 2]);
  });

  it("the file made read-only under the worker: the call rejects 503, nothing is written, and the inbox is not stuck", async () => {
    const file = databaseFile();
    const db = open(file);
    const { handle } = await worker(db, "worker-read-only");
    db.close();
    dbs.splice(dbs.indexOf(db), 1);
    const readOnly = new Database(file, { readonly: true });
    dbs.push(readOnly);
    const inbox = new SqliteInbox(readOnly, { scope: "worker-read-only", timeout: "1s" });
    const event = createEvent("flag.updated");
    const failed = await inbox
      .handle((e: WebhookEvent, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(e.id);
      })(event)
      .catch((error: unknown) => error);
    expect((failed as WebhookError).code).toBe("store_unavailable");
    expect([readOnly.inTransaction, effects(readOnly)]).toEqual([false, []]);
    expect(handle).toBeTypeOf("function");
  });

  it("the same event handled twice at once, on one connection and on a second one to the file: one run, the others duplicates", async () => {
    const file = databaseFile();
    const db = open(file);
    const peerDb = open(file);
    const one = await worker(db, "worker-race");
    const peer = await worker(peerDb, "worker-race");
    const event = createEvent("flag.updated");
    const results = await Promise.all([one.handle(event), one.handle(event), peer.handle(event), peer.handle(event)]);
    expect(results.filter((result) => result === undefined)).toHaveLength(1);
    expect(results.filter((result) => (result as { status?: number } | undefined)?.status === 204)).toHaveLength(3);
    expect([effects(db), one.runs() + peer.runs(), db.inTransaction, peerDb.inTransaction]).toEqual([
      [event.id],
      1,
      false,
      false,
    ]);
  });
});
