import { randomUUID } from "node:crypto";
import { type Client, createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { drizzle } from "drizzle-orm/better-sqlite3";
import { sqliteTable, text } from "drizzle-orm/sqlite-core";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ADAPTERS, closeReceivers, type Send } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { expectExactlyOnce } from "../../support/inbox-handle.js";
import {
  databaseFile,
  type ReceiverProcess,
  receiver,
  remoteStore,
  startReceiver,
  stopReceiver,
} from "../../support/sqlite.js";
import { describeStoreContract, expectScopeChecked } from "../../support/store-contract.js";

// flag-webhooks/sqlite in this process (Node 20) on real engines: better-sqlite3 12 and
// @libsql/client on a local file. The DedupeStore contract over each, with a peer on a second
// connection to the same WAL file; the inbox's answers through the Express, Koa, fetch and Lambda
// adapters, with the handler's writes checked in the file; the Drizzle recipe; prune, scopes,
// migrate. node:sqlite and bun:sqlite: runtimes.test.ts; D1 and Durable Objects: d1.test.ts.

afterAll(closeReceivers);

/** A better-sqlite3 connection on `file`, in WAL mode, with the effects table. */
function connect(file: string): Database.Database {
  const db = new Database(file);
  db.pragma("journal_mode = wal");
  db.exec("create table if not exists effects (event_id text not null, note text)");
  return db;
}
const connections: { close(): void }[] = [];
afterAll(() => {
  for (const c of connections) c.close();
});

describeStoreContract("SqliteInbox over better-sqlite3 (two connections on one WAL file)", {
  shared: true,
  scoped: true,
  async make() {
    const file = databaseFile();
    const [a, b] = [connect(file), connect(file)];
    connections.push(a, b);
    const store = new SqliteInbox(a, { scope: "contract" });
    store.migrate();
    return {
      store,
      peer: new SqliteInbox(b, { scope: "contract" }),
      otherScope: new SqliteInbox(a, { scope: "contract-other" }),
    };
  },
});

// The peer is another process (Node 20, the same driver) on the same file: two libSQL clients in
// one process would wait for each other's lock with the event loop stopped (docs/sqlite.md).
let libsqlPeer: ReceiverProcess | undefined;
describeStoreContract("SqliteInbox over @libsql/client (a local file; the peer in another process)", {
  shared: true,
  scoped: true,
  async make() {
    const file = databaseFile();
    const client = createClient({ url: `file:${file}` });
    connections.push(client);
    await client.execute("pragma journal_mode = wal");
    const store = new SqliteInbox(client, { scope: "contract" });
    await store.migrate();
    libsqlPeer = await startReceiver("node20", { DRIVER: "libsql", FILE: file, SCOPE: "contract" });
    return {
      store,
      peer: remoteStore(libsqlPeer, "store"),
      otherScope: new SqliteInbox(client, { scope: "contract-other" }),
    };
  },
  async close() {
    if (libsqlPeer) await stopReceiver(libsqlPeer);
  },
});

describe("SqliteInbox options", () => {
  const db = new Database(":memory:");
  afterAll(() => db.close());

  it("requires a scope of 1-100 characters of A-Z a-z 0-9 . _ -, naming the option", () => {
    expectScopeChecked("SqliteInbox", (scope) => new SqliteInbox(db, { scope } as never));
    expect(() => new SqliteInbox(db, undefined as never)).toThrow(/"scope"/);
  });

  it("refuses a table name that is not an identifier, a database it does not know, and bad durations", () => {
    for (const table of ['x"; drop table y; --', "a.b.c", "1abc", ""]) {
      expect(() => new SqliteInbox(db, { scope: "s", table })).toThrow(/option "table"/);
    }
    expect(() => new SqliteInbox({} as never, { scope: "s" })).toThrow(/node:sqlite DatabaseSync, a better-sqlite3/);
    expect(() => new SqliteInbox(db, { scope: "s", retention: "soon" })).toThrow(/retention/);
    expect(() => new SqliteInbox(db, { scope: "s", timeout: 2 ** 31 })).toThrow(/"timeout" must be at most/);
    expect(() => inboxOf(db).handle("nope" as never)).toThrow(/takes a function/);
    expect(() => new SqliteInbox(db, { scope: "s", now: 5 as never })).toThrow(
      new TypeError('flag-webhooks: option "now" must be a function'),
    );
  });

  it("takes the order option on a connection, its positions table beside the table it names", async () => {
    const file = connect(databaseFile());
    connections.push(file);
    const inbox = new SqliteInbox(file, { scope: "ordered", table: "ordered_inbox", order: true });
    await inbox.migrate();
    const tables = file.prepare("select name from sqlite_master where type = 'table' order by name").all();
    expect(tables).toEqual([{ name: "effects" }, { name: "ordered_inbox" }, { name: "ordered_inbox_positions" }]);
  });

  it("a receiver with a maxAge its retention does not cover refuses it when it is made", async () => {
    const inbox = new SqliteInbox(db, { scope: "short", retention: "2s" });
    await expect(
      receiver(
        "Express",
        inbox.handle(() => {}),
        { maxAge: "5m" },
      ),
    ).rejects.toThrow(/retention/);
  });
});

function inboxOf(db: Database.Database, scope = "s") {
  return new SqliteInbox(db, { scope });
}

// ---------------------------------------------------------------------------------------------
// The answers of handle(), through each adapter, on better-sqlite3.

describe("SqliteInbox.handle() through every adapter (better-sqlite3)", () => {
  let db: Database.Database;
  let runs: Map<string, number>;
  let failOnce: Set<string>;
  beforeAll(() => {
    db = connect(databaseFile());
    connections.push(db);
    new SqliteInbox(db, { scope: "setup" }).migrate();
  });
  beforeEach(() => {
    runs = new Map();
    failOnce = new Set();
  });
  const effects = (id: string) =>
    (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n;
  const inboxRows = (id: string) =>
    (db.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number }).n;

  /** The handler: writes an effect through tx, then does what the id's first word says. */
  const handler = async (event: WebhookEvent, tx: Database.Database) => {
    runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
    tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    const [word] = event.id.split(":");
    const first = !failOnce.has(event.id);
    failOnce.add(event.id);
    if (word === "throw" && first) throw new Error("the handler failed after writing");
    if (word === "reply-503" && first) return { status: 503, body: { retry: "later" } };
    if (word === "slow") await new Promise((resolve) => setTimeout(resolve, 150));
    return undefined;
  };

  for (const adapter of ADAPTERS) {
    describe(adapter, () => {
      let send: Send;
      beforeAll(async () => {
        send = await receiver(adapter, new SqliteInbox(db, { scope: `cases-${adapter}` }).handle(handler));
      });

      it("a first delivery runs the handler in the transaction, commits, answers 204; a copy is a duplicate", async () => {
        const id = `evt_${randomUUID()}`;
        const answer = await send(body(id));
        expect([answer.status, answer.headers["webhook-duplicate"]]).toEqual([204, undefined]);
        expect([runs.get(id), effects(id), inboxRows(id)]).toEqual([1, 1, 1]);
        const again = await send(body(id));
        expect([again.status, again.headers["webhook-duplicate"]]).toEqual([204, "true"]);
        expect([runs.get(id), effects(id)]).toEqual([1, 1]);
        expect(db.inTransaction).toBe(false);
      });

      it("copies at the same moment take turns on the connection: one run, the others duplicates", async () => {
        const id = `slow:${randomUUID()}`;
        const answers = await Promise.all(Array.from({ length: 4 }, () => send(body(id))));
        expect(answers.map((a) => a.status)).toEqual([204, 204, 204, 204]);
        expect(answers.filter((a) => a.headers["webhook-duplicate"] === "true")).toHaveLength(3);
        expect([runs.get(id), effects(id), inboxRows(id)]).toEqual([1, 1, 1]);
      });

      it("a handler that throws rolls back its writes (500); the sender's retry runs it again", async () => {
        const id = `throw:${randomUUID()}`;
        const answer = await send(body(id));
        expect([answer.status, answer.json?.error?.code]).toEqual([500, "handler_error"]);
        expect([effects(id), inboxRows(id)]).toEqual([0, 0]);
        expect((await send(body(id))).status).toBe(204);
        expect([runs.get(id), effects(id)]).toEqual([2, 1]);
      });

      it("a handler that answers non-2xx rolls back too, and that answer is sent; the retry runs it", async () => {
        const id = `reply-503:${randomUUID()}`;
        expect((await send(body(id))).status).toBe(503);
        expect([effects(id), inboxRows(id)]).toEqual([0, 0]);
        expect((await send(body(id))).status).toBe(204);
        expect([runs.get(id), effects(id)]).toEqual([2, 1]);
      });
    });
  }

  // What a handler returns never makes a 2xx for writes rolled back, nor a second run.
  const odd: [name: string, make: () => unknown][] = [
    ["{ statusCode: 503 }", () => ({ statusCode: 503 })],
    ["{ statusCode: 201 }", () => ({ statusCode: 201 })],
    ['{ status: "200" }', () => ({ status: "200" })],
    ["Response 503", () => new Response('{"busy":true}', { status: 503 })],
    ["Response 200", () => new Response(null, { status: 200 })],
  ];
  it.each(ADAPTERS)(
    "%s: whatever the handler returns, a 2xx answer means committed, and a retry leaves the writes once",
    async (adapter) => {
      const returned = new Map<string, unknown>();
      const inbox = new SqliteInbox(db, { scope: `odd-${adapter}` });
      const send = await receiver(
        adapter,
        inbox.handle((event, tx) => {
          tx.prepare("insert into effects (event_id) values (?)").run(event.id);
          const value = returned.get(event.id);
          returned.delete(event.id);
          return value;
        }),
      );
      for (const [name, make] of odd) {
        const id = `evt_${randomUUID()}`;
        returned.set(id, make());
        const first = await send(body(id));
        const ok = first.status >= 200 && first.status <= 299;
        expect({ name, ok, committed: ok ? effects(id) === 1 : "n/a" }).toEqual({ name, ok, committed: ok || "n/a" });
        expect([name, (await send(body(id))).status]).toEqual([name, 204]);
        expect([name, effects(id), inboxRows(id)]).toEqual([name, 1, 1]);
      }
    },
  );

  it("an id a DedupeStore claim of the same scope holds is in progress (409), not a duplicate; once completed, a duplicate", async () => {
    const inbox = new SqliteInbox(db, { scope: "claimed-lease" });
    const id = `evt_${randomUUID()}`;
    expect(await inbox.claim(id, 60_000)).toBe("claimed");
    const onEvent = inbox.handle(handler);
    await expect(onEvent({ id } as WebhookEvent)).rejects.toMatchObject({ code: "delivery_in_progress" });
    await inbox.complete(id, 60_000);
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect([runs.get(id), effects(id)]).toEqual([undefined, 0]);
  });

  it("called outside a receiver, a call that waits for its turn past timeout rejects 503, saying what it waited for", async () => {
    const inbox = new SqliteInbox(db, { scope: "turn-direct", timeout: 100 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held = inbox.handle(() => gate)({ id: `evt_${randomUUID()}` } as WebhookEvent);
    const failed = await inbox
      .handle(() => {})({ id: `evt_${randomUUID()}` } as WebhookEvent)
      .catch((error: unknown) => error);
    release();
    await held;
    expect(failed).toMatchObject({ code: "store_unavailable" });
    expect(((failed as Error).cause as Error).message).toBe(
      "SQLite did not give the inbox its turn and the write lock within 100 ms",
    );
  });

  it("a delivery that waits for its turn longer than timeout answers 503 with Retry-After, and runs on retry", async () => {
    const inbox = new SqliteInbox(db, { scope: "turns", timeout: 200 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const send = await receiver(
      "Express",
      inbox.handle(async (event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
        if (event.id.startsWith("hold:")) await gate;
      }),
    );
    const held = send(body(`hold:${randomUUID()}`));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const id = `evt_${randomUUID()}`;
    const started = performance.now();
    const waited = await send(body(id));
    expect([waited.status, waited.json?.error?.code]).toEqual([503, "store_unavailable"]);
    expect(waited.headers["retry-after"]).toMatch(/^\d+$/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(180);
    expect(effects(id)).toBe(0);
    release();
    expect((await held).status).toBe(204);
    expect((await send(body(id))).status).toBe(204);
    expect(effects(id)).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------
// libSQL, Drizzle, a router, prune, scopes, migrate.

describe("SqliteInbox.handle() with each client", () => {
  it("@libsql/client: tx is its Transaction; writes commit with the id, a throw rolls them back; concurrent copies run once", async () => {
    const client: Client = createClient({ url: `file:${databaseFile()}` });
    connections.push(client);
    await client.execute("create table effects (event_id text not null)");
    const inbox = new SqliteInbox(client, { scope: "libsql" });
    await inbox.migrate();
    const fails = new Set<string>();
    const onEvent = inbox.handle(async (event, tx) => {
      await tx.execute({ sql: "insert into effects (event_id) values (?)", args: [event.id] });
      if (fails.delete(event.id)) throw new Error("fails once");
    });
    const effects = async (id: string) =>
      Number(
        (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
      );
    await expectExactlyOnce(onEvent, (id) => fails.add(id), effects);
    const ids = Array.from({ length: 8 }, () => `evt_${randomUUID()}`);
    await Promise.all(ids.flatMap((id) => [onEvent({ id } as WebhookEvent), onEvent({ id } as WebhookEvent)]));
    for (const id of ids) expect(await effects(id)).toBe(1);
  });

  it("Drizzle on better-sqlite3 (recipe): the app's Drizzle database writes in the inbox's transaction", async () => {
    const sqlite = connect(databaseFile());
    connections.push(sqlite);
    const audit = sqliteTable("effects", { event_id: text("event_id").notNull(), note: text("note") });
    const db = drizzle(sqlite);
    const inbox = new SqliteInbox(sqlite, { scope: "drizzle" });
    inbox.migrate();
    const fails = new Set<string>();
    await expectExactlyOnce(
      inbox.handle((event) => {
        db.insert(audit).values({ event_id: event.id, note: event.type }).run();
        if (fails.delete(event.id)) throw new Error("fails once");
      }),
      (id) => fails.add(id),
      (id) => (sqlite.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n,
    );
  });

  it("a createRouter() router whose handlers take (event, tx) is a valid fn", async () => {
    const db = connect(databaseFile());
    connections.push(db);
    const inbox = new SqliteInbox(db, { scope: "router" });
    inbox.migrate();
    const router = createRouter<[tx: Database.Database]>().on("flag.updated", (event, tx) => {
      tx.prepare("insert into effects (event_id, note) values (?, ?)").run(event.id, event.data.flag);
    });
    const send = await receiver("Express", inbox.handle(router));
    const id = `evt_${randomUUID()}`;
    expect((await send(body(id))).status).toBe(204);
    expect((await send(body(id))).headers["webhook-duplicate"]).toBe("true");
    expect(db.prepare("select note from effects where event_id = ?").all(id)).toEqual([{ note: "new-checkout" }]);
  });

  it("prune() deletes this scope's expired ids, in batches, and no other scope's", async () => {
    const db = connect(databaseFile());
    connections.push(db);
    const inbox = new SqliteInbox(db, { scope: "prune", retention: 1 });
    const other = new SqliteInbox(db, { scope: "prune-other", retention: 1 });
    const kept = new SqliteInbox(db, { scope: "prune", retention: "1h" });
    inbox.migrate();
    const handle = inbox.handle(() => {});
    for (let i = 0; i < 2500; i++) await handle({ id: `old-${i}` } as WebhookEvent);
    await other.handle(() => {})({ id: "old-1" } as WebhookEvent);
    await kept.handle(() => {})({ id: "young" } as WebhookEvent);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await inbox.prune()).toBe(2500);
    expect(await inbox.prune()).toBe(0);
    expect(db.prepare("select scope, id from flag_webhooks_inbox order by scope").all()).toEqual([
      { scope: "prune", id: "young" },
      { scope: "prune-other", id: "old-1" },
    ]);
    // Past its retention an id is forgotten: a replay that old runs again (maxAge refuses it first).
    const runs: string[] = [];
    await other.handle((event) => void runs.push(event.id))({ id: "old-1" } as WebhookEvent);
    expect(runs).toEqual(["old-1"]);
  });

  it("two endpoints (scopes) sharing the file each handle the same event id", async () => {
    const db = connect(databaseFile());
    connections.push(db);
    const [a, b] = [new SqliteInbox(db, { scope: "endpoint-a" }), new SqliteInbox(db, { scope: "endpoint-b" })];
    a.migrate();
    const write = (event: WebhookEvent, tx: Database.Database) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    };
    const id = `evt_${randomUUID()}`;
    expect(await a.handle(write)({ id } as WebhookEvent)).toBeUndefined();
    expect(await b.handle(write)({ id } as WebhookEvent)).toBeUndefined();
    expect(await a.handle(write)({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect((db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n).toBe(2);
  });

  it("migrate() is silent and idempotent, from several connections at once, and takes a table in an attached database", async () => {
    const file = databaseFile();
    const dbs = Array.from({ length: 3 }, () => connect(file));
    connections.push(...dbs);
    const inboxes = dbs.map((db) => new SqliteInbox(db, { scope: "m" }));
    await Promise.all(inboxes.map((inbox) => inbox.migrate()));
    await (inboxes[0] as SqliteInbox).migrate();
    const attached = connect(databaseFile());
    connections.push(attached);
    attached.exec(`attach database '${databaseFile("audit.db")}' as audit`);
    const inbox = new SqliteInbox(attached, { scope: "m", table: "audit.inbox" });
    await inbox.migrate();
    await inbox.handle(() => {})({ id: "m-1" } as WebhookEvent);
    expect(attached.prepare("select id from audit.inbox").all()).toEqual([{ id: "m-1" }]);
    expect(attached.prepare("select name from audit.sqlite_master where type = 'index'").all()).toContainEqual({
      name: "inbox_expires",
    });
  });
});
