import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { storedId } from "../../../src/store-contract/keys.js";
import { closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { databaseFile, receiver } from "../../support/sqlite.js";

// The SQLite inbox when the database fails under it, on real files (better-sqlite3 12, Node 20):
// a file locked by another connection, a read-only database, a full database, a file deleted
// under the app, a handler that ends the inbox's transaction itself, and ids a table could not
// hold as they are. Never a 2xx without the commit, and nothing lost: the sender's retry runs it.

afterAll(closeReceivers);
const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});

/** A connection on a new file (WAL unless said), with the inbox's table and an effects table. */
function fresh(journal = "wal", file = databaseFile()): { db: Database.Database; file: string } {
  const db = new Database(file);
  opened.push(db);
  db.pragma(`journal_mode = ${journal}`);
  db.exec("create table effects (event_id text not null, payload blob)");
  new SqliteInbox(db, { scope: "setup" }).migrate();
  return { db, file };
}
const count = (db: Database.Database, sql: string, ...params: unknown[]) =>
  (db.prepare(sql).get(...params) as { n: number }).n;
const effects = (db: Database.Database, id: string) =>
  count(db, "select count(*) as n from effects where event_id = ?", id);

describe("SqliteInbox when the database fails", () => {
  it("a file locked by another connection: 503 with Retry-After within about timeout, the handler not run; then handled", async () => {
    const { db, file } = fresh();
    const other = new Database(file);
    opened.push(other);
    let ran = 0;
    const send = await receiver(
      "Express",
      new SqliteInbox(db, { scope: "locked", timeout: 300 }).handle((event, tx) => {
        ran++;
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      }),
    );
    other.exec("begin exclusive");
    const id = `evt_${randomUUID()}`;
    const started = performance.now();
    const answer = await send(body(id));
    const waited = performance.now() - started;
    expect([answer.status, answer.json?.error?.code, answer.headers["retry-after"]]).toEqual([
      503,
      "store_unavailable",
      "10",
    ]);
    // It waited for the lock without stopping the event loop, then gave up.
    expect(waited).toBeGreaterThanOrEqual(280);
    expect(waited).toBeLessThan(2000);
    expect(ran).toBe(0);
    other.exec("rollback");
    expect((await send(body(id))).status).toBe(204);
    expect([ran, effects(db, id)]).toEqual([1, 1]);
    // The app's own busy_timeout is left as it was (better-sqlite3's default, 5 s).
    expect(db.pragma("busy_timeout", { simple: true })).toBe(5000);
  });

  it("a read-only database: 503 store_unavailable, never a 2xx; migrate() says why", async () => {
    const { file } = fresh();
    const readonly = new Database(file, { readonly: true });
    opened.push(readonly);
    const inbox = new SqliteInbox(readonly, { scope: "readonly" });
    await expect(inbox.migrate()).rejects.toThrow(/readonly|read-only|unavailable/i);
    let ran = 0;
    const send = await receiver(
      "Koa",
      inbox.handle(() => {
        ran++;
      }),
    );
    const answer = await send(body(`evt_${randomUUID()}`));
    expect([answer.status, answer.json?.error?.code]).toEqual([503, "store_unavailable"]);
    expect(ran).toBe(0);
  });

  it("a full database (max_page_count): the handler's write fails, 503 and rolled back; with room again, the retry writes once", async () => {
    const { db } = fresh();
    const send = await receiver(
      "fetch",
      new SqliteInbox(db, { scope: "full" }).handle((event, tx) => {
        tx.prepare("insert into effects (event_id, payload) values (?, ?)").run(event.id, Buffer.alloc(64 * 1024));
      }),
    );
    const pages = count(db, "select page_count as n from pragma_page_count()");
    db.pragma(`max_page_count = ${pages + 4}`);
    const id = `evt_${randomUUID()}`;
    const answer = await send(body(id));
    expect([answer.status, answer.json?.error?.code]).toEqual([503, "store_unavailable"]);
    expect(effects(db, id)).toBe(0);
    expect(count(db, "select count(*) as n from flag_webhooks_inbox where id = ?", id)).toBe(0);
    // Full before the claim itself: the inbox's own insert fails, also 503.
    db.pragma(`max_page_count = ${count(db, "select page_count as n from pragma_page_count()")}`);
    const many = await Promise.all(
      Array.from({ length: 40 }, () => send(body(`evt_${randomUUID()}_${"x".repeat(900)}`))),
    );
    expect(many.every((a) => a.status === 503 || a.status === 204)).toBe(true);
    expect(many.some((a) => a.status === 503)).toBe(true);
    db.pragma("max_page_count = 1073741823");
    expect((await send(body(id))).status).toBe(204);
    expect(effects(db, id)).toBe(1);
    expect(db.inTransaction).toBe(false);
  });

  it("a file deleted under the app: with a rollback journal, 503 (SQLITE_READONLY_DBMOVED), never a 2xx", async () => {
    const { db, file } = fresh("delete");
    const send = await receiver(
      "Lambda",
      new SqliteInbox(db, { scope: "deleted" }).handle((event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      }),
    );
    expect((await send(body(`evt_${randomUUID()}`))).status).toBe(204);
    rmSync(file);
    const answer = await send(body(`evt_${randomUUID()}`));
    expect([answer.status, answer.json?.error?.code]).toEqual([503, "store_unavailable"]);
  });

  it("a file deleted under the app in WAL mode: SQLite goes on writing to the deleted file (what docs/sqlite.md warns of)", async () => {
    const { db, file } = fresh("wal");
    const onEvent = new SqliteInbox(db, { scope: "deleted-wal" }).handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    rmSync(file);
    const id = `evt_${randomUUID()}`;
    // Committed, into a file no process can open again: the id and the effect are lost together.
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect(effects(db, id)).toBe(1);
    const reopened = new Database(file);
    opened.push(reopened);
    expect(count(reopened, "select count(*) as n from sqlite_master")).toBe(0);
  });
});

describe("a handler's COMMIT, ROLLBACK or BEGIN through tx: never the inbox's transaction ended", () => {
  const { db } = fresh();
  const cases: [name: string, end: (tx: Database.Database) => void][] = [
    ["COMMIT through tx", (tx) => tx.exec("commit")],
    ["ROLLBACK through tx", (tx) => tx.exec("rollback")],
    ["COMMIT then BEGIN through tx", (tx) => tx.exec("commit; begin")],
    ["END through tx, prepared", (tx) => tx.prepare("end transaction").run()],
  ];
  it.each(cases)(
    "%s, with no BEGIN before it: refused in the handler (500), nothing committed, the retry runs it once",
    async (_name, end) => {
      const misbehave = new Set<string>();
      const errors: unknown[] = [];
      const send = await receiver(
        "Express",
        new SqliteInbox(db, { scope: `ends-${randomUUID()}` }).handle((event, tx) => {
          tx.prepare("insert into effects (event_id) values (?)").run(event.id);
          if (misbehave.delete(event.id)) end(tx);
        }),
        { onError: (error) => void errors.push(error) },
      );
      const id = `evt_${randomUUID()}`;
      misbehave.add(id);
      const answer = await send(body(id));
      expect([answer.status, answer.json?.error?.code]).toEqual([500, "handler_error"]);
      expect(String((errors[0] as Error).message)).toMatch(/return to commit, throw to roll back/);
      expect(db.inTransaction).toBe(false);
      expect(effects(db, id)).toBe(0);
      expect((await send(body(id))).status).toBe(204);
      expect(effects(db, id)).toBe(1);
    },
  );

  it("BEGIN … COMMIT through tx is a savepoint: nothing commits before the answer, the id and the writes once", async () => {
    const seen: number[] = [];
    const other = new Database(db.name);
    opened.push(other);
    const onEvent = new SqliteInbox(db, { scope: "begin-commit" }).handle((event, tx) => {
      tx.exec("BEGIN IMMEDIATE");
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      tx.exec("/* done */ COMMIT");
      seen.push(effects(other, event.id));
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect(seen).toEqual([0]);
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect(effects(db, id)).toBe(1);
  });

  it("a throw after its own COMMIT: 500, nothing committed, the retry runs it again", async () => {
    let runs = 0;
    const send = await receiver(
      "Express",
      new SqliteInbox(db, { scope: "throw-after-commit" }).handle((event, tx) => {
        runs++;
        tx.exec("begin");
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
        tx.exec("commit");
        if (runs === 1) throw new Error("fails after its COMMIT");
      }),
      { onError: () => {} },
    );
    const id = `evt_${randomUUID()}`;
    expect((await send(body(id))).status).toBe(500);
    expect(effects(db, id)).toBe(0);
    expect((await send(body(id))).status).toBe(204);
    expect([runs, effects(db, id)]).toEqual([2, 1]);
  });

  it("a ROLLBACK it catches, then more writes: the rolled-back part undone, the rest once", async () => {
    const onEvent = new SqliteInbox(db, { scope: "caught-rollback" }).handle((event, tx) => {
      try {
        tx.exec("begin");
        tx.prepare("insert into effects (event_id) values (?)").run(`${event.id}-undone`);
        throw new Error("inner");
      } catch {
        tx.exec("rollback");
      }
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect([effects(db, id), effects(db, `${id}-undone`)]).toEqual([1, 0]);
  });

  it("a BEGIN never ended fails the handler: 500, rolled back, the retry runs it; BEGIN EXCLUSIVE is refused", async () => {
    let first = true;
    const send = await receiver(
      "Express",
      new SqliteInbox(db, { scope: "begin-inside" }).handle((event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
        if (first) {
          first = false;
          tx.exec("begin");
        }
      }),
      { onError: () => {} },
    );
    const id = `evt_${randomUUID()}`;
    expect((await send(body(id))).status).toBe(500);
    expect(effects(db, id)).toBe(0);
    expect((await send(body(id))).status).toBe(204);
    expect(effects(db, id)).toBe(1);
    const exclusive = new SqliteInbox(db, { scope: "exclusive" }).handle((_event, tx) => {
      tx.exec("begin exclusive");
    });
    await expect(exclusive({ id } as WebhookEvent)).rejects.toThrow(/cannot be a savepoint/);
  });

  it("a savepoint of the handler's own (its ORM's nested transaction) is fine: 204", async () => {
    const onEvent = new SqliteInbox(db, { scope: "nested" }).handle((event, tx) => {
      tx.exec("savepoint mine");
      tx.prepare("insert into effects (event_id) values (?)").run(`${event.id}-undone`);
      tx.exec("rollback to mine; release mine");
      tx.transaction(() => tx.prepare("insert into effects (event_id) values (?)").run(event.id))();
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect([effects(db, id), effects(db, `${id}-undone`)]).toEqual([1, 0]);
  });

  it("BEGIN, ROLLBACK and COMMIT prepared through tx are savepoints when each runs, by run(), all(), get() or iterate()", async () => {
    const answers: unknown[] = [];
    const onEvent = new SqliteInbox(db, { scope: "prepared-steps" }).handle((event, tx) => {
      const [begin, rollback] = [tx.prepare("begin immediate"), tx.prepare("rollback")];
      const insert = tx.prepare("insert into effects (event_id) values (?)");
      answers.push(begin.run());
      insert.run(`${event.id}-undone`);
      answers.push(rollback.all());
      answers.push(begin.get());
      insert.run(event.id);
      answers.push([...tx.prepare("commit").iterate()]);
      // The connection's own members, values and methods, are the connection's.
      answers.push(tx.inTransaction);
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect(answers).toEqual([{ changes: 0, lastInsertRowid: 0 }, [], undefined, [], true]);
    expect([effects(db, id), effects(db, `${id}-undone`), db.inTransaction]).toEqual([1, 0, false]);
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
  });
});

describe("ids a table could not hold as they are", () => {
  it("are stored by the stores' one rule (storedId): long ids, NUL and lone surrogates hashed, each handled once", async () => {
    const { db } = fresh();
    const inbox = new SqliteInbox(db, { scope: "ids" });
    const onEvent = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    const long = `evt_${"é".repeat(3000)}`;
    for (const id of [long, `${long}x`, "evt_\u0000nul", "evt_\ud800", "evt_plain", `#${"0".repeat(64)}`]) {
      expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
      expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
      const rows = db
        .prepare("select id from flag_webhooks_inbox where scope = 'ids' and id = ?")
        .all(await storedId(id));
      expect(rows).toHaveLength(1);
    }
    expect(count(db, "select count(*) as n from flag_webhooks_inbox where scope = 'ids'")).toBe(6);
    expect(count(db, "select max(length(id)) as n from flag_webhooks_inbox where scope = 'ids'")).toBeLessThanOrEqual(
      1024,
    );
  });
});
