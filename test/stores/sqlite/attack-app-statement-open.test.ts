import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { nodeScript } from "../../support/node-bundle.js";
import { databaseFile, RUNTIMES } from "../../support/sqlite.js";

// Attack on the inbox's one-statement writes run alone (autocommit) when the connection says no
// transaction is open: enqueue() must answer 202 only once its row is committed. The connection
// says "none open" (sqlite3_get_autocommit) while an app's write statement is still running on it
// (an `UPDATE … RETURNING` iterated lazily across awaits, which node:sqlite allows): SQLite then
// defers the lone statement's commit until the app's statement ends ("an implicit transaction is
// committed when the last active statement finishes"). Before, BEGIN IMMEDIATE … COMMIT failed at
// COMMIT with SQLITE_BUSY ("SQL statements in progress"), and the delivery was answered 503.
// An explicit BEGIN or SAVEPOINT the app left open is seen by the connection, and refused; a read
// statement left running holds no commit back.

const root = resolve(import.meta.dirname, "../../..");
const run = promisify(execFile);

/**
 * A script for Node 22 or 24: a SqliteInbox over node:sqlite on FILE, an app state made on the
 * same connection by APP, one enqueue(), then what a second connection sees. With KILL=1 the
 * process SIGKILLs itself after the answer, the app's statement still running (a crash).
 */
const SCRIPT = `
import { DatabaseSync } from "node:sqlite";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
const { FILE, APP, ID, KILL } = process.env;
const db = new DatabaseSync(FILE);
db.exec("pragma journal_mode = wal; pragma busy_timeout = 3210");
const inbox = new SqliteInbox(db, { scope: "attack", timeout: "300ms" });
await inbox.migrate();
db.exec("create table if not exists app (x integer); insert into app values (1), (2), (3)");
const other = new DatabaseSync(FILE);
const seen = () => other.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(ID).n;
let iterator;
if (APP === "statement") {
  iterator = db.prepare("update app set x = x + 10 returning x").iterate();
  iterator.next();
} else if (APP === "read") {
  iterator = db.prepare("select x from app").iterate();
  iterator.next();
} else if (APP === "begin") db.exec("begin; insert into app values (4)");
else if (APP === "savepoint") db.exec("savepoint app_work; insert into app values (4)");
let status;
try {
  const reply = await inbox.enqueue()(createEvent("flag.updated", { id: ID }));
  status = reply?.status ?? 204;
} catch (error) {
  status = error?.status ?? 500;
}
const result = { status, open: db.isTransaction, busyTimeout: db.prepare("pragma busy_timeout").get().timeout, seenAtAnswer: seen() };
if (KILL === "1") {
  process.stdout.write(JSON.stringify(result) + "\\n");
  process.kill(process.pid, "SIGKILL");
}
if (iterator) for (const _ of iterator);
if (APP === "begin" || APP === "savepoint") db.exec(APP === "begin" ? "rollback" : "rollback to app_work; release app_work");
result.seenAfterApp = seen();
process.stdout.write(JSON.stringify(result) + "\\n");
`;

let bundled: Promise<string> | undefined;
/** The script bundled once from src/ (flag-webhooks/* from source), node:sqlite left to the runtime. */
function script(): Promise<string> {
  bundled ??= nodeScript("attack-app-statement-open", SCRIPT, ["node:sqlite"]);
  return bundled;
}

interface Outcome {
  status: number;
  open: boolean;
  busyTimeout: number;
  seenAtAnswer: number;
  seenAfterApp?: number;
}

/** Runs the script on `runtime`; the outcome it printed, and whether the event is in the file after it ended. */
async function attempt(runtime: "node22" | "node24", app: string, kill = false) {
  const file = databaseFile();
  const id = `evt_${randomUUID()}`;
  const env = { ...process.env, FILE: file, APP: app, ID: id, KILL: kill ? "1" : "0" };
  const out = await run(RUNTIMES[runtime], [await script()], { env, cwd: root }).catch(
    (error: { stdout?: string; signal?: string }) => {
      if (kill && error.signal === "SIGKILL") return { stdout: error.stdout ?? "" };
      throw error;
    },
  );
  const outcome = JSON.parse(out.stdout.trim().split("\n").at(-1) ?? "{}") as Outcome;
  const reader = new Database(file, { readonly: true });
  try {
    const kept = (reader.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number })
      .n;
    return { ...outcome, kept };
  } finally {
    reader.close();
  }
}

describe.each(["node22", "node24"] as const)(
  "node:sqlite on %s: a state the app left open on the inbox's connection",
  (runtime) => {
    // Broken while the inbox ran a lone statement when no transaction was open (fixed: always
    // BEGIN IMMEDIATE … COMMIT, whose COMMIT fails here and is answered 503): with an app's UPDATE … RETURNING iterated one row (and not finished) on the
    // connection, enqueue() answered 202 while a second connection saw 0 rows of it (3 of 3 runs
    // on Node 22 and on Node 24, WAL); SIGKILLed after the 202, before the app's statement ended,
    // the event was not in the file (3 of 3): an answered 2xx lost. The event is committed only
    // when the app's statement ends. A fix must not take `isTransaction === false` as "a lone
    // statement commits at once" (e.g. keep BEGIN IMMEDIATE … COMMIT, whose COMMIT then fails with
    // SQLITE_BUSY and the delivery is answered 503), or must see that the COMMIT did not happen.
    it("an app's write statement still running: each 202 is committed when answered, and survives a SIGKILL", async () => {
      for (let i = 0; i < 3; i++) {
        const live = await attempt(runtime, "statement");
        expect(live.busyTimeout).toBe(3210);
        if (live.status === 202) expect(live.seenAtAnswer).toBe(1);
        else expect(live.status).toBe(503);
        const killed = await attempt(runtime, "statement", true);
        expect(killed.kept).toBe(killed.status === 202 ? 1 : 0);
      }
    });

    it("a BEGIN or a SAVEPOINT the app left open: refused 503, never joined, the app's transaction and busy_timeout kept", async () => {
      for (const app of ["begin", "savepoint"]) {
        const outcome = await attempt(runtime, app);
        expect(outcome).toMatchObject({ status: 503, open: true, busyTimeout: 3210, seenAtAnswer: 0, seenAfterApp: 0 });
        expect(outcome.kept).toBe(0);
      }
    });

    // Held: a read statement left running does not hold the commit back (SQLite commits once no
    // write statement is active), so the 202 is already committed.
    it("an app's read statement still running: 202, committed when answered, kept after a SIGKILL", async () => {
      const live = await attempt(runtime, "read");
      expect(live).toMatchObject({ status: 202, open: false, busyTimeout: 3210, seenAtAnswer: 1, kept: 1 });
      const killed = await attempt(runtime, "read", true);
      expect(killed).toMatchObject({ status: 202, seenAtAnswer: 1, kept: 1 });
    });
  },
);
