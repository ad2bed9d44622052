import { type Client, createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it, vi } from "vitest";
import { eventJson } from "../../support/deliveries.js";
import { describeKeepThenWork, type KeepingInbox } from "../../support/keep-then-work.js";
import { databaseFile, receiver } from "../../support/sqlite.js";

// Keep-then-work on real SQLite files: better-sqlite3 (with a second connection to the same WAL
// file racing the first) and @libsql/client on a local file. Then what migrate() does to a table
// handle() made, and the answer when the database cannot take an event.

const closing: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closing.splice(0)) await close();
});

function connect(file: string): Database.Database {
  const db = new Database(file);
  db.pragma("journal_mode = wal");
  db.exec("create table if not exists effects (event_id text not null)");
  closing.push(() => db.close());
  return db;
}

describeKeepThenWork("SQLite over better-sqlite3", async () => {
  const file = databaseFile();
  const [a, b] = [connect(file), connect(file)];
  const migrated = new Set<string>();
  const make = (db: Database.Database, scope: string, now: () => number, retention?: number) => {
    const inbox = new SqliteInbox(db, { scope, now, ...(retention ? { retention } : {}) });
    if (!migrated.has(scope)) inbox.migrate();
    migrated.add(scope);
    return inbox as unknown as KeepingInbox;
  };
  return {
    inbox: (scope, now, retention) => make(a, scope, now, retention),
    peer: (scope, now) => make(b, scope, now),
    write: (tx, id) => (tx as Database.Database).prepare("insert into effects (event_id) values (?)").run(id),
    effects: async (id) =>
      Number((a.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n),
    setBody: async (scope, id, body) => {
      a.prepare("update flag_webhooks_inbox set body = ? where scope = ? and id = ?").run(body, scope, id);
    },
  };
});

describeKeepThenWork("SQLite over @libsql/client (a local file)", async () => {
  const client: Client = createClient({ url: `file:${databaseFile()}` });
  closing.push(() => client.close());
  await client.execute("create table if not exists effects (event_id text not null)");
  const migrated = new Set<string>();
  return {
    inbox(scope, now, retention) {
      const inbox = new SqliteInbox(client, { scope, now, ...(retention ? { retention } : {}) });
      if (!migrated.has(scope)) void inbox.migrate();
      migrated.add(scope);
      return inbox as unknown as KeepingInbox;
    },
    write: (tx, id) =>
      (tx as Awaited<ReturnType<Client["transaction"]>>).execute({
        sql: "insert into effects (event_id) values (?)",
        args: [id],
      }),
    effects: async (id) =>
      Number(
        (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
      ),
    setBody: async (scope, id, body) => {
      await client.execute({
        sql: "update flag_webhooks_inbox set body = ? where scope = ? and id = ?",
        args: [body, scope, id],
      });
    },
  };
});

describe("SqliteInbox.migrate() on a table handle() made", () => {
  it("adds the columns and the kept states, keeps every row, and handle() works as before", async () => {
    const db = connect(databaseFile());
    // The table as migrate() made it before keep-then-work.
    db.exec(`create table flag_webhooks_inbox (
        scope text not null, id text not null, state text not null check (state in ('claimed', 'done')),
        token text, expires_at integer not null, handled_at integer not null, primary key (scope, id)
      ) without rowid;
      create index flag_webhooks_inbox_expires on flag_webhooks_inbox (scope, expires_at)`);
    // handle() reads the real clock: so does this inbox, as in production.
    const inbox = new SqliteInbox(db, { scope: "old" });
    const handled = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    await handled({ id: "evt_before", type: "flag.updated" } as never);
    await inbox.migrate();
    const definition = () =>
      (db.prepare("select sql from sqlite_master where name = 'flag_webhooks_inbox'").get() as { sql: string }).sql;
    const migrated = definition();
    expect(migrated).toContain("'parked'");
    await inbox.migrate();
    expect(definition()).toBe(migrated);
    const columns = (db.prepare("pragma table_info(flag_webhooks_inbox)").all() as { name: string }[]).map(
      (c) => c.name,
    );
    expect(columns).toEqual(expect.arrayContaining(["body", "attempts", "next_at", "lease_until", "last_error"]));
    const indexes = (db.prepare("pragma index_list(flag_webhooks_inbox)").all() as { name: string }[]).map(
      (i) => i.name,
    );
    expect(indexes).toEqual(expect.arrayContaining(["flag_webhooks_inbox_expires", "flag_webhooks_inbox_due"]));
    expect(await inbox.kept("evt_before")).toMatchObject({ state: "done", attempts: 0, body: null });
    // The id handle() handled is a duplicate to the receiving side, and handle() goes on as before.
    expect(await inbox.enqueue()({ id: "evt_before", type: "flag.updated" } as never)).toMatchObject({ status: 204 });
    expect(await handled({ id: "evt_after", type: "flag.updated" } as never)).toBeUndefined();
    expect(await handled({ id: "evt_after", type: "flag.updated" } as never)).toMatchObject({ status: 204 });
    expect(await inbox.enqueue()({ id: "evt_new", type: "flag.updated", createdAt: "x" } as never)).toEqual({
      status: 202,
    });
  });
});

describe("SqliteInbox.enqueue() when the database cannot take the event", () => {
  it("answers 503 with Retry-After while another connection holds the write lock, 202 once it is free", async () => {
    const file = databaseFile();
    const [a, b] = [connect(file), connect(file)];
    const inbox = new SqliteInbox(a, { scope: "locked", timeout: 200 });
    await inbox.migrate();
    const send = await receiver("fetch", inbox.enqueue());
    b.exec("begin immediate");
    const refused = await send(eventJson("evt_locked"));
    expect(refused.status).toBe(503);
    expect(refused.json?.error?.code).toBe("store_unavailable");
    expect(refused.headers["retry-after"]).toBeDefined();
    b.exec("rollback");
    expect((await send(eventJson("evt_locked"))).status).toBe(202);
  });
});

describe("SqliteInbox.work() when the database fails", () => {
  it("tells onError and goes on looking; close() still ends it", async () => {
    const db = new Database(databaseFile());
    const inbox = new SqliteInbox(db, { scope: "gone" });
    await inbox.migrate();
    db.close();
    const errors: unknown[] = [];
    const worker = inbox.work(() => {}, { interval: 10, onError: (error) => errors.push(error) });
    await vi.waitFor(() => expect(errors.length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 10 });
    await worker.close();
    expect(errors[0]).toMatchObject({
      code: "store_unavailable",
      cause: expect.objectContaining({ message: expect.stringMatching(/not open/) }),
    });
  });
});
