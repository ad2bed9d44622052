import { randomUUID } from "node:crypto";
import { type Client, createClient } from "@libsql/client";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { databaseFile, receiver } from "../../support/sqlite.js";

// A SQLite inbox's handler holds the connection's one write turn while it runs: one that never
// ends would stop every delivery on the file. Past handlerTimeout the inbox rolls it back and
// gives the turn on; the late handler's writes through tx fail, nothing of it commits, and the
// delivery answers 500 (the sender's retry runs it again). On real files, better-sqlite3 and
// libSQL, through Express, with a second connection waiting for the write lock.

afterAll(closeReceivers);
const closing: { close(): void }[] = [];
afterAll(() => {
  for (const c of closing) c.close();
});

/** What each driver needs: a connection on a WAL file with an effects table, and a count of an id's effects. */
interface Driver {
  open(file: string): Promise<Database.Database | Client>;
  insert(tx: unknown, id: string): Promise<unknown>;
  effects(db: Database.Database | Client, id: string): Promise<number>;
}
const drivers: Record<string, Driver> = {
  "better-sqlite3": {
    async open(file) {
      const db = new Database(file);
      closing.push(db);
      db.pragma("journal_mode = wal");
      db.exec("create table if not exists effects (event_id text not null)");
      return db;
    },
    insert: async (tx, id) => (tx as Database.Database).prepare("insert into effects (event_id) values (?)").run(id),
    effects: async (db, id) =>
      (
        (db as Database.Database).prepare("select count(*) as n from effects where event_id = ?").get(id) as {
          n: number;
        }
      ).n,
  },
  libSQL: {
    async open(file) {
      const client = createClient({ url: `file:${file}` });
      closing.push(client);
      await client.execute("pragma journal_mode = wal");
      await client.execute("create table if not exists effects (event_id text not null)");
      return client;
    },
    insert: (tx, id) =>
      (tx as { execute(s: unknown): Promise<unknown> }).execute({
        sql: "insert into effects (event_id) values (?)",
        args: [id],
      }),
    effects: async (db, id) =>
      Number(
        (await (db as Client).execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] }))
          .rows[0]?.n,
      ),
  },
};

describe.each(Object.entries(drivers))("SqliteInbox on %s: a handler that never ends", (_name, driver) => {
  it("is rolled back at handlerTimeout: 500, its late writes fail, the next delivery and a second connection get their turn, the retry runs it once", async () => {
    const file = databaseFile();
    const db = await driver.open(file);
    await new SqliteInbox(db, { scope: "setup" }).migrate();
    const hanging = new Set<string>();
    let wake = () => {};
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const lateWrites: unknown[] = [];
    let wrote = () => {};
    const lateWritten = new Promise<void>((resolve) => {
      wrote = resolve;
    });
    const inbox = new SqliteInbox(db, { scope: "deadline", handlerTimeout: 300, timeout: 3000 });
    const errors: unknown[] = [];
    const send = await receiver(
      "Express",
      inbox.handle(async (event: WebhookEvent, tx: unknown) => {
        await driver.insert(tx, event.id);
        if (!hanging.delete(event.id)) return;
        // Hangs well past the deadline, then tries to write again, as a stuck handler that wakes up would.
        await woken;
        await driver.insert(tx, `${event.id}-late`).catch((error: unknown) => void lateWrites.push(error));
        wrote();
      }),
      { onError: (error) => void errors.push(error) },
    );
    const stuck = `evt_${randomUUID()}`;
    hanging.add(stuck);
    const first = send(body(stuck));
    // Sent while the first holds the turn: each waits for it, and gets it once the deadline passed.
    const next = `evt_${randomUUID()}`;
    const queued = send(body(next));
    const other = await driver.open(file);
    const second = new SqliteInbox(other, { scope: "deadline", timeout: 3000 }).handle(
      async (event: WebhookEvent, tx: unknown) => {
        await driver.insert(tx, event.id);
      },
    );
    const fromOther = `evt_${randomUUID()}`;
    const otherAnswer = second({ id: fromOther } as never);

    const answer = await first;
    expect([answer.status, answer.json?.error?.code]).toEqual([500, "handler_error"]);
    expect(String((errors[0] as Error).message)).toMatch(/handlerTimeout \(300 ms\)/);
    expect((await queued).status).toBe(204);
    expect(await otherAnswer).toBeUndefined();
    wake();
    await lateWritten;
    expect(lateWrites).toEqual([expect.objectContaining({ message: expect.stringMatching(/transaction has ended/) })]);
    expect([await driver.effects(db, stuck), await driver.effects(db, `${stuck}-late`)]).toEqual([0, 0]);
    expect([await driver.effects(db, next), await driver.effects(db, fromOther)]).toEqual([1, 1]);
    // The sender's retry: handled once.
    expect((await send(body(stuck))).status).toBe(204);
    expect(await driver.effects(db, stuck)).toBe(1);
  });
});

describe("SqliteInbox: tx once the inbox's transaction has ended", () => {
  it("a statement prepared through tx is the driver's own: kept and run again in the next delivery", async () => {
    const db = await drivers["better-sqlite3"]?.open(databaseFile());
    await new SqliteInbox(db as Database.Database, { scope: "setup" }).migrate();
    let insert: Database.Statement | undefined;
    const onEvent = new SqliteInbox(db as Database.Database, { scope: "kept-statement" }).handle((event, tx) => {
      insert ??= tx.prepare("insert into effects (event_id) values (?)");
      insert.run(event.id);
    });
    const ids = [`evt_${randomUUID()}`, `evt_${randomUUID()}`];
    for (const id of ids) expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    for (const id of ids) expect(await drivers["better-sqlite3"]?.effects(db as Database.Database, id)).toBe(1);
  });
});

describe("SqliteInbox: tx kept past the delivery", () => {
  it("fails every call once the transaction has ended: the connection's own methods too, not only exec and prepare", async () => {
    const db = (await drivers["better-sqlite3"]?.open(databaseFile())) as Database.Database;
    await new SqliteInbox(db, { scope: "setup" }).migrate();
    let kept: Database.Database | undefined;
    const onEvent = new SqliteInbox(db, { scope: "kept-tx" }).handle((_event, tx) => {
      kept = tx;
      expect(tx.pragma("user_version", { simple: true })).toBe(0);
    });
    expect(await onEvent({ id: `evt_${randomUUID()}` } as WebhookEvent)).toBeUndefined();
    const late = kept as Database.Database;
    for (const call of [
      () => late.pragma("user_version"),
      () => late.exec("select 1"),
      () => late.prepare("select 1"),
    ]) {
      expect(call).toThrow(/the inbox's transaction has ended/);
    }
    expect(late.inTransaction).toBe(false);
  });
});

describe("SqliteInbox: handlerTimeout", () => {
  it("is a duration option: a TypeError naming it otherwise", () => {
    const db = new Database(":memory:");
    closing.push(db);
    expect(() => new SqliteInbox(db, { scope: "s", handlerTimeout: "soon" })).toThrow(/"handlerTimeout"/);
    expect(() => new SqliteInbox(db, { scope: "s", handlerTimeout: 2 ** 31 })).toThrow(
      /"handlerTimeout" must be at most/,
    );
  });
});
