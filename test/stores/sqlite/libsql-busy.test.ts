import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { type Client, createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { closeReceivers, type Send } from "../../support/adapter-receivers.js";
import { eventJson, signedHeaders } from "../../support/deliveries.js";
import { post } from "../../support/http.js";
import { type Started, startProcess, untilPrinted } from "../../support/processes.js";
import {
  databaseFile,
  type Runtime,
  receiver,
  SQLITE_SECRET,
  startReceiver,
  stopReceiver,
} from "../../support/sqlite.js";

// The server keeps serving after the database refused it for a while: another process holds the
// file's write lock past the inbox's timeout, so the inbox's BEGIN IMMEDIATE fails with
// SQLITE_BUSY and the deliveries meanwhile are answered 503 (the sender retries); once the lock
// is released, the next deliveries are kept and answered 2xx at once, on the same client, and the
// worker takes, runs and marks events again. libSQL's client keeps a statement that failed with
// SQLITE_BUSY open on its connection until it is garbage-collected (the test never collects it),
// and an open statement refuses the inbox's savepoint and keeps a lone write uncommitted. A COMMIT
// that waited for a rollback journal's reader past the timeout, and the synchronous drivers
// (better-sqlite3 here, node:sqlite on Node 22 and 24 and bun:sqlite on Bun in a process of its
// own), which reset a failed statement, are held to the same.

const root = resolve(import.meta.dirname, "../../..");
/** How long the inbox waits for the write lock before it answers 503: short, the lock is held past it. */
const TIMEOUT = 150;

const closing: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closing.splice(0)) await close();
  await closeReceivers();
});

/**
 * Another process (Node, better-sqlite3) that holds `file`'s write lock (BEGIN IMMEDIATE), or with
 * `begin` another lock, from when this resolves until `release()`, which rolls back, and resolves
 * once the process is gone.
 */
async function holdLock(file: string, begin = "begin immediate"): Promise<{ release(): Promise<void> }> {
  const script = `
    const db = new (require("better-sqlite3"))(process.argv[1]);
    db.exec(process.argv[2]);
    process.on("SIGTERM", () => { db.exec("rollback"); db.close(); process.exit(0); });
    process.stdout.write("locked\\n");
    setInterval(() => {}, 60000);`;
  const holder: Started = startProcess(process.execPath, ["-e", script, file, begin], { cwd: root });
  closing.push(() => holder.kill());
  await untilPrinted("the process that holds the write lock", holder, "locked");
  return { release: () => holder.stop() };
}

/** Three new event ids. */
const fresh = (label: string) => Array.from({ length: 3 }, () => `evt_${label}_${randomUUID()}`);
/** The status of each delivery of `ids`, sent one after the other (the inbox's transactions take turns anyway). */
async function statuses(send: Send, ids: string[]): Promise<number[]> {
  const answers: number[] = [];
  for (const id of ids) answers.push((await send(eventJson(id))).status);
  return answers;
}

/** A libSQL client on a new WAL file with an effects table, closed after the tests. */
async function libsqlFile(): Promise<{ file: string; client: Client }> {
  const file = databaseFile();
  const client = createClient({ url: `file:${file}` });
  closing.push(() => client.close());
  await client.execute("pragma journal_mode = wal");
  await client.execute("create table effects (event_id text not null)");
  return { file, client };
}
const effectsOf = async (client: Client, id: string) =>
  Number(
    (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
  );
const insertEffect = (tx: unknown, id: string) =>
  (tx as Awaited<ReturnType<Client["transaction"]>>).execute({
    sql: "insert into effects (event_id) values (?)",
    args: [id],
  });

describe("SqliteInbox on @libsql/client (a local file) after SQLITE_BUSY", () => {
  it("enqueue(): 503 while another process holds the write lock, then each next delivery 202 and kept", async () => {
    const { file, client } = await libsqlFile();
    const inbox = new SqliteInbox(client, { scope: "busy-enqueue", timeout: TIMEOUT });
    await inbox.migrate();
    const send = await receiver("fetch", inbox.enqueue({ groupCommit: false }));
    const lock = await holdLock(file);
    const refused = fresh("refused");
    expect(await statuses(send, refused)).toEqual([503, 503, 503]);
    await lock.release();
    const next = fresh("next");
    expect(await statuses(send, [...next, ...refused])).toEqual([202, 202, 202, 202, 202, 202]);
    for (const id of [...next, ...refused]) expect((await inbox.kept(id))?.state).toBe("pending");
    // A plain write of the app on the same client commits too, where another connection sees it.
    await client.execute({ sql: "insert into effects (event_id) values ('app')", args: [] });
    const reader = createClient({ url: `file:${file}` });
    closing.push(() => reader.close());
    expect(await effectsOf(reader, "app")).toBe(1);
  });

  it("enqueue() with group commit: 503 while locked, then 202 for deliveries sent at once", async () => {
    const { file, client } = await libsqlFile();
    const inbox = new SqliteInbox(client, { scope: "busy-group", timeout: TIMEOUT });
    await inbox.migrate();
    const send = await receiver("fetch", inbox.enqueue());
    const lock = await holdLock(file);
    const refused = fresh("refused");
    expect((await Promise.all(refused.map((id) => send(eventJson(id))))).map((a) => a.status)).toEqual([503, 503, 503]);
    await lock.release();
    const next = fresh("next");
    expect((await Promise.all(next.map((id) => send(eventJson(id))))).map((a) => a.status)).toEqual([202, 202, 202]);
    for (const id of next) expect((await inbox.kept(id))?.state).toBe("pending");
  });

  it("handle(): 503 while another process holds the write lock, then each next delivery 204, its effect once", async () => {
    const { file, client } = await libsqlFile();
    const inbox = new SqliteInbox(client, { scope: "busy-handle", timeout: TIMEOUT });
    await inbox.migrate();
    const send = await receiver(
      "Express",
      inbox.handle((event, tx) => insertEffect(tx, event.id)),
    );
    const lock = await holdLock(file);
    const refused = fresh("refused");
    expect(await statuses(send, refused)).toEqual([503, 503, 503]);
    await lock.release();
    const next = fresh("next");
    expect(await statuses(send, [...next, ...refused])).toEqual([204, 204, 204, 204, 204, 204]);
    for (const id of [...next, ...refused]) expect(await effectsOf(client, id)).toBe(1);
  });

  it("handle() on a rollback journal: 503 while another process reads past the COMMIT's wait, then 204", async () => {
    const file = databaseFile();
    const client = createClient({ url: `file:${file}` });
    closing.push(() => client.close());
    await client.execute("create table effects (event_id text not null)");
    const inbox = new SqliteInbox(client, { scope: "busy-commit", timeout: TIMEOUT });
    await inbox.migrate();
    const send = await receiver(
      "Express",
      inbox.handle((event, tx) => insertEffect(tx, event.id)),
    );
    // A reader's transaction: the inbox's BEGIN IMMEDIATE takes the lock, its COMMIT waits for the reader.
    const lock = await holdLock(file, "begin; select count(*) from sqlite_master");
    const refused = fresh("refused");
    expect(await statuses(send, refused)).toEqual([503, 503, 503]);
    await lock.release();
    const next = fresh("next");
    expect(await statuses(send, [...next, ...refused])).toEqual([204, 204, 204, 204, 204, 204]);
    for (const id of [...next, ...refused]) expect(await effectsOf(client, id)).toBe(1);
  });

  it("work(): a take refused while locked, then the worker takes, runs, marks a failure and marks done", async () => {
    const { file, client } = await libsqlFile();
    // A clock of the test's: the failed attempt's retry is made due by moving it on.
    let clock = Date.now();
    const inbox = new SqliteInbox(client, { scope: "busy-work", timeout: TIMEOUT, now: () => clock });
    await inbox.migrate();
    const send = await receiver("fetch", inbox.enqueue());
    const ids = [...fresh("kept"), `throw:${randomUUID()}`];
    expect(await statuses(send, ids)).toEqual([202, 202, 202, 202]);
    const runs = new Map<string, number>();
    const worker = inbox.work(
      async (event, tx) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        await insertEffect(tx, event.id);
        if (event.id.startsWith("throw:") && runs.get(event.id) === 1) throw new Error("fails once");
      },
      { interval: false, retries: ["1m"], jitter: 0, onError: () => {} },
    );
    closing.push(() => worker.close());
    const lock = await holdLock(file);
    await expect(worker.drain()).rejects.toThrow();
    expect(runs.size).toBe(0);
    await lock.release();
    // The failing event's first attempt fails (its failure marked, due again in a minute), its second is done.
    expect(await worker.drain()).toBe(4);
    expect(await inbox.kept(ids[3] as string)).toMatchObject({
      state: "pending",
      attempts: 1,
      lastError: "fails once",
    });
    clock += 60_000;
    expect(await worker.drain()).toBe(1);
    for (const id of ids) {
      expect((await inbox.kept(id))?.state).toBe("done");
      expect(await effectsOf(client, id)).toBe(1);
    }
    expect((await inbox.kept(ids[3] as string))?.attempts).toBe(2);
  });
});

describe("SqliteInbox on better-sqlite3 after its BEGIN IMMEDIATE failed with SQLITE_BUSY", () => {
  it("handle() and enqueue(): 503 while another process holds the write lock, then 2xx", async () => {
    const file = databaseFile();
    const db = new Database(file);
    closing.push(() => db.close());
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
    const inbox = new SqliteInbox(db, { scope: "busy-sync", timeout: TIMEOUT });
    await inbox.migrate();
    const handled = await receiver(
      "Express",
      inbox.handle((event, tx) => tx.prepare("insert into effects (event_id) values (?)").run(event.id)),
    );
    const kept = await receiver("fetch", inbox.enqueue());
    const lock = await holdLock(file);
    expect(await statuses(handled, fresh("refused"))).toEqual([503, 503, 503]);
    expect(await statuses(kept, fresh("refused"))).toEqual([503, 503, 503]);
    await lock.release();
    expect(await statuses(handled, fresh("next"))).toEqual([204, 204, 204]);
    expect(await statuses(kept, fresh("next"))).toEqual([202, 202, 202]);
  });
});

describe.each<[Runtime, string]>([
  ["node22", "node:sqlite"],
  ["node24", "node:sqlite"],
  ["bun", "bun:sqlite"],
])(
  "SqliteInbox on %s's %s (in its own process) after a BEGIN IMMEDIATE that failed with SQLITE_BUSY",
  (runtime, driver) => {
    it("handle(): 503 while another process holds the write lock, then 204", async () => {
      const file = databaseFile();
      const process_ = await startReceiver(runtime, {
        DRIVER: driver,
        FILE: file,
        WAL: "1",
        SCOPE: "busy",
        TIMEOUT_MS: String(TIMEOUT),
      });
      closing.push(() => stopReceiver(process_));
      const send: Send = async (text) => {
        const reply = await post(`http://127.0.0.1:${process_.port}/webhooks`, {
          body: text,
          headers: await signedHeaders(SQLITE_SECRET, text),
        });
        return { status: reply.status, headers: {}, json: undefined };
      };
      const lock = await holdLock(file);
      expect(await statuses(send, fresh("refused"))).toEqual([503, 503, 503]);
      await lock.release();
      expect(await statuses(send, fresh("next"))).toEqual([204, 204, 204]);
      expect(process_.output).not.toContain("unhandled rejection");
    });
  },
);
