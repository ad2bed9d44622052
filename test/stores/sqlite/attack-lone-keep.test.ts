import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { eventJson, signedHeaders, statusOf } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { KEEP_CRASH_SECRET, startKeepProcess } from "../../support/keep-crash.js";
import { nodeScript } from "../../support/node-bundle.js";
import { committedIn, databaseFile, RUNTIMES } from "../../support/sqlite.js";

// Attack on the lone synchronous keep: a delivery alone (no other of its onEvent on its way) is
// kept in the request's own tick, BEGIN IMMEDIATE, INSERT and COMMIT at once on the app's
// connection (better-sqlite3 here). Whatever the app left on that connection, and whatever the
// INSERT meets, a 202 must mean a committed row of its own, anything else keeps nothing, and the
// app's busy_timeout comes back.

const APP = 3210;
const opened: Database.Database[] = [];
afterAll(() => {
  for (const db of opened) if (db.open) db.close();
});
const eventOf = (id: string) => createEvent("flag.updated", { id }) as WebhookEvent;
const newId = () => `evt_${randomUUID()}`;

async function setUp() {
  const file = databaseFile();
  const db = new Database(file);
  opened.push(db);
  db.pragma("journal_mode = wal");
  db.pragma(`busy_timeout = ${APP}`);
  db.exec("create table app (v text)");
  const inbox = new SqliteInbox(db, { scope: "lone", timeout: "300ms" });
  await inbox.migrate();
  const committed = committedIn(file);
  return { file, db, inbox, keep: inbox.enqueue(), committed };
}
const busyTimeout = (db: Database.Database) => db.pragma("busy_timeout", { simple: true });

describe("the lone synchronous keep, better-sqlite3", () => {
  it("an app's transaction left open on the connection: 503, never joined, busy_timeout back", async () => {
    const { db, keep, committed } = await setUp();
    db.exec("begin; insert into app values ('mine')");
    const id = newId();
    const status = await statusOf(keep(eventOf(id)));
    const joined = db.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number };
    expect(db.inTransaction).toBe(true);
    db.exec("rollback");
    expect({ status, joined: joined.n, committed: committed(id), busy: busyTimeout(db) }).toEqual({
      status: 503,
      joined: 0,
      committed: false,
      busy: APP,
    });
    expect(await statusOf(keep(eventOf(id)))).toBe(202);
    expect(committed(id)).toBe(true);
  });

  it("an app's read iterator open on the connection: 503 (the connection is busy), busy_timeout back, then kept", async () => {
    const { db, keep, committed } = await setUp();
    db.exec("insert into app values ('a'), ('b'), ('c')");
    const rows = db.prepare("select v from app").iterate();
    rows.next();
    const id = newId();
    const status = await statusOf(keep(eventOf(id)));
    rows.return?.();
    expect({ status, committed: committed(id), busy: busyTimeout(db), open: db.inTransaction }).toEqual({
      status: 503,
      committed: false,
      busy: APP,
      open: false,
    });
    expect(await statusOf(keep(eventOf(id)))).toBe(202);
    expect(committed(id)).toBe(true);
  });

  it.each([
    ["RAISE(ABORT)", "select raise(abort, 'refused by the app')"],
    ["RAISE(FAIL)", "select raise(fail, 'refused by the app')"],
    ["RAISE(ROLLBACK)", "select raise(rollback, 'refused by the app')"],
  ])(
    "a keep that throws a non-BUSY error (a trigger's %s): not a 2xx, nothing kept, nothing left open, busy_timeout back",
    async (_name, body) => {
      const { db, keep, committed } = await setUp();
      db.exec(`create trigger refuse before insert on flag_webhooks_inbox begin ${body}; end`);
      const id = newId();
      const status = await statusOf(keep(eventOf(id)));
      expect(status).toBeGreaterThanOrEqual(500);
      expect({ committed: committed(id), open: db.inTransaction, busy: busyTimeout(db) }).toEqual({
        committed: false,
        open: false,
        busy: APP,
      });
      db.exec("drop trigger refuse");
      expect(await statusOf(keep(eventOf(id)))).toBe(202);
    },
  );
});

describe("the lone synchronous keep, better-sqlite3, a receiver process SIGKILLed right after its 202", () => {
  // Each round: one delivery alone to a receiver process (keep-then-work's crash fixture), the
  // process killed as soon as the 202's status line arrives; the file opened again here.
  it("each answered delivery's row is in the file", { timeout: 120_000 }, async () => {
    const file = databaseFile("lone-kill.db");
    const db = new Database(file);
    opened.push(db);
    db.pragma("journal_mode = wal");
    await new SqliteInbox(db, { scope: "keep-crash" }).migrate();
    db.close();
    const answered: string[] = [];
    for (let round = 0; round < 8; round++) {
      const port = await freePort();
      const receiver = await startKeepProcess("receiver", port, { FILE: file, DRIVER: "better-sqlite3" });
      try {
        const id = newId();
        const body = eventJson(id);
        const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
          method: "POST",
          body,
          headers: await signedHeaders(KEEP_CRASH_SECRET, body),
        });
        if (response.status === 202) {
          receiver.child.kill("SIGKILL");
          answered.push(id);
        }
      } finally {
        await receiver.kill();
      }
    }
    const reader = new Database(file);
    opened.push(reader);
    const missing = answered.filter(
      (id) => reader.prepare("select 1 from flag_webhooks_inbox where id = ?").get(id) === undefined,
    );
    console.log(`lone keep, SIGKILL after the 202: ${answered.length} answered 202, ${missing.length} missing`);
    expect(answered.length).toBe(8);
    expect(missing).toEqual([]);
  });
});

/**
 * A script for Bun: a SqliteInbox over bun:sqlite on FILE, an app state left on the same
 * connection by APP (an open BEGIN, a read stepped once, or none), one enqueue() alone, then what
 * it answered and what a second connection sees; with KILL=1 it SIGKILLs itself after the answer.
 */
const BUN_SCRIPT = `
import { Database } from "bun:sqlite";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
const { FILE, APP, ID, KILL } = process.env;
const db = new Database(FILE);
db.exec("pragma journal_mode = wal; pragma busy_timeout = 3210");
const inbox = new SqliteInbox(db, { scope: "lone", timeout: "300ms" });
await inbox.migrate();
db.exec("create table if not exists app (x integer); insert into app values (1), (2), (3)");
const other = new Database(FILE);
const seen = () => other.query("select count(*) as n from flag_webhooks_inbox where id = ?").get(ID).n;
let rows;
if (APP === "begin") db.exec("begin; insert into app values (4)");
else if (APP === "read") { rows = db.prepare("select x from app").iterate(); rows.next(); }
let status;
try {
  status = (await inbox.enqueue()(createEvent("flag.updated", { id: ID })))?.status ?? 204;
} catch (error) {
  status = error?.status ?? 500;
}
const result = { status, open: db.inTransaction, busyTimeout: db.query("pragma busy_timeout").get().timeout, seenAtAnswer: seen() };
process.stdout.write(JSON.stringify(result) + "\\n");
if (KILL === "1") process.kill(process.pid, "SIGKILL");
if (rows) for (const _ of rows);
if (APP === "begin") db.exec("rollback");
`;

const root = resolve(import.meta.dirname, "../../..");
let bunBundle: Promise<string> | undefined;
function bunScript(): Promise<string> {
  bunBundle ??= nodeScript("attack-lone-keep-bun", BUN_SCRIPT, ["bun:sqlite"]);
  return bunBundle;
}

async function onBun(app: "none" | "begin" | "read", kill = false) {
  const file = databaseFile();
  const id = newId();
  const env = { ...process.env, FILE: file, APP: app, ID: id, KILL: kill ? "1" : "0" };
  const out = await promisify(execFile)(RUNTIMES.bun, [await bunScript()], { env, cwd: root }).catch(
    (error: { stdout?: string; signal?: string }) => {
      if (kill && error.signal === "SIGKILL") return { stdout: error.stdout ?? "" };
      throw error;
    },
  );
  const outcome = JSON.parse(out.stdout.trim().split("\n").at(-1) ?? "{}") as {
    status: number;
    open: boolean;
    busyTimeout: number;
    seenAtAnswer: number;
  };
  const reader = new Database(file, { readonly: true });
  try {
    const kept = (reader.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number })
      .n;
    return { ...outcome, kept };
  } finally {
    reader.close();
  }
}

describe("the lone synchronous keep on bun:sqlite (Bun, a process of its own)", () => {
  it("alone: 202 committed when answered, in the file after a SIGKILL right after the answer", async () => {
    for (let i = 0; i < 3; i++) {
      const killed = await onBun("none", true);
      expect(killed).toMatchObject({ status: 202, seenAtAnswer: 1, busyTimeout: 3210, kept: 1 });
    }
  });

  it("an app's BEGIN left open: 503, never joined, the app's transaction and busy_timeout kept", async () => {
    expect(await onBun("begin")).toMatchObject({
      status: 503,
      open: true,
      busyTimeout: 3210,
      seenAtAnswer: 0,
      kept: 0,
    });
  });

  it("an app's read stepped once: 202 committed when answered, or 503 and nothing kept", async () => {
    const outcome = await onBun("read", true);
    console.log(`bun:sqlite, a read left running: ${JSON.stringify(outcome)}`);
    expect(outcome.busyTimeout).toBe(3210);
    expect(outcome.kept).toBe(outcome.status === 202 ? 1 : 0);
    if (outcome.status === 202) expect(outcome.seenAtAnswer).toBe(1);
  });
});
