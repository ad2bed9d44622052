#!/usr/bin/env node
// `npm run soak:inbox`: the Postgres inbox soak. 100,000 valid deliveries at 50 connections
// across TWO receiver processes (scripts/soak-inbox-server.mjs), each with its own pg Pool on
// one PostgreSQL that this script starts (test/support/postgres-server.ts: Debian's postgresql,
// as the postgres user under root) on a free loopback port and stops by pid. Every delivery is
// sent twice, to different receivers: a quarter of the pairs at the same moment, the rest one
// after the other. Like a real sender, 409 and 503 are retried after a short sleep. Checks: one
// soak_effects row per event (the table has no unique key), 0 lost, 0 non-2xx after retries,
// every pool connection returned, RSS growth; reports statements (round trips) per copy and CPU.
// SOAK_DELIVERIES and SOAK_CONCURRENCY change the size; a hard time limit applies. Run with tsx
// (the npm script does), which loads the TypeScript server launcher.
//
// `npm run soak:inbox -- --sqlite`: the same on the SQLite inbox instead, no server at all: both
// receivers open one SQLite file in WAL mode (better-sqlite3, under .test-results/ in the clone),
// keep ids for SOAK_RETENTION_MS (20 s) and prune() every 2 s, so the file's size must stay bounded:
// it is reported at each quarter of the run, and every id is either still there or was pruned.
import { fork } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdirSync, rmSync, statSync } from "node:fs";
import { Agent, request } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { startPostgres, stopPostgres } from "../test/support/postgres-server.ts";
import { soakEvent } from "./soak-lib.mjs";

const TOTAL = Number(process.env.SOAK_DELIVERIES ?? 100_000);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 50);
const WARMUP = Math.min(10_000, Math.floor(TOTAL / 10));
const HARD_LIMIT_MS = 30 * 60 * 1000;
const RETRY_SLEEP_MS = 10; // a real sender waits Retry-After seconds; the soak cannot
const MAX_RETRIES = 500;
const secret = randomBytes(16).toString("hex");
const sign = (body) => createHmac("sha256", secret).update(body).digest("hex");

// ------------------------------------------------------------------------ postgres or sqlite

const SQLITE = process.argv.includes("--sqlite");
const RETENTION = Number(process.env.SOAK_RETENTION_MS ?? 20_000);
const sqliteDir = join(import.meta.dirname, "../.test-results/soak-sqlite");
const sqliteFile = join(sqliteDir, "inbox.db");
/** The SQLite file's bytes on disk, with its WAL. */
const fileBytes = () =>
  ["", "-wal"].reduce(
    (sum, suffix) => sum + (statSync(`${sqliteFile}${suffix}`, { throwIfNoEntry: false })?.size ?? 0),
    0,
  );
let sqlite;
if (SQLITE) {
  rmSync(sqliteDir, { recursive: true, force: true });
  mkdirSync(sqliteDir, { recursive: true });
  const { default: Database } = await import("better-sqlite3");
  sqlite = new Database(sqliteFile);
  sqlite.pragma("journal_mode = wal");
  sqlite.exec("create table soak_effects (event_id text not null)");
}
const postgres = SQLITE
  ? undefined
  : await startPostgres().catch((error) => {
      console.error(`soak: ${error.message}`);
      process.exit(1);
    });
const children = [];
let stopping = false;
async function stopAll() {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  if (postgres) await stopPostgres(postgres);
}
const timer = setTimeout(async () => {
  console.error("soak: hard time limit reached, stopping");
  await stopAll();
  process.exit(1);
}, HARD_LIMIT_MS);

const admin = postgres && new pg.Pool({ connectionString: postgres.url, max: 2 });
await admin?.query("create table soak_effects (event_id text not null)");

// -------------------------------------------------------------------------------- receivers

function startReceiver(name) {
  const child = fork(new URL("./soak-inbox-server.mjs", import.meta.url), [], {
    env: {
      ...process.env,
      SOAK_SECRET: secret,
      SOAK_POOL: String(CONCURRENCY / 2),
      ...(SQLITE
        ? { SOAK_SQLITE_FILE: sqliteFile, SOAK_RETENTION: String(RETENTION), SOAK_PRUNE: name === "a" ? "1" : "" }
        : { SOAK_DATABASE_URL: postgres.url }),
    },
    execArgv: ["--expose-gc"],
  });
  children.push(child);
  const ask = (message, key) =>
    new Promise((resolve) => {
      const listener = (reply) => {
        if (key in reply) {
          child.off("message", listener);
          resolve(reply);
        }
      };
      child.on("message", listener);
      child.send(message);
    });
  return new Promise((resolve, reject) => {
    child.once("message", ({ port }) =>
      resolve({ name, child, ask, port, agent: new Agent({ keepAlive: true, maxSockets: CONCURRENCY / 2 }) }),
    );
    child.once("exit", (code) => reject(new Error(`receiver ${name} exited early with ${code}`)));
  });
}
// The first migrates; then both start.
if (SQLITE) {
  const { SqliteInbox } = await import("../dist/sqlite.js");
  await new SqliteInbox(sqlite, { scope: "soak" }).migrate();
} else {
  const { PostgresInbox } = await import("../dist/postgres.js");
  await new PostgresInbox(admin, { scope: "soak" }).migrate();
}
const receivers = await Promise.all([startReceiver("a"), startReceiver("b")]);

// ------------------------------------------------------------------------------ the sender

function post(receiver, body, signature) {
  return new Promise((resolve) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: receiver.port,
        path: "/webhooks",
        method: "POST",
        agent: receiver.agent,
        headers: { "content-type": "application/json", "service-signature": signature, "content-length": body.length },
      },
      (res) => {
        res.resume();
        res.on("end", () =>
          resolve({ status: res.statusCode, duplicate: res.headers["webhook-duplicate"] === "true" }),
        );
      },
    );
    req.on("error", () => resolve({ status: 0, duplicate: false }));
    req.end(body);
  });
}

const retries = {};
async function send(receiver, body, signature) {
  for (let attempt = 0; ; attempt++) {
    const answer = await post(receiver, body, signature);
    if ((answer.status !== 409 && answer.status !== 503) || attempt >= MAX_RETRIES) return answer;
    retries[answer.status] = (retries[answer.status] ?? 0) + 1;
    await sleep(RETRY_SLEEP_MS);
  }
}

const finals = {};
let ranAnswers = 0;
let duplicateAnswers = 0;
let concurrentPairs = 0;
let next = 0;
const rssAfterWarmup = [0, 0];
const heapAfterWarmup = [0, 0];
/** [deliveries sent, the SQLite file's bytes] at each quarter of the run. */
const sizes = [];
const started = Date.now();
const cpuStart = await Promise.all(receivers.map((r) => r.ask("stats", "rss")));
async function worker() {
  while (next < TOTAL) {
    const n = next++;
    const body = soakEvent(n);
    const signature = sign(body);
    const [first, second] = n % 2 ? [receivers[0], receivers[1]] : [receivers[1], receivers[0]];
    let answers;
    if (n % 4 === 1) {
      concurrentPairs++;
      answers = await Promise.all([send(first, body, signature), send(second, body, signature)]);
    } else {
      answers = [await send(first, body, signature), await send(second, body, signature)];
    }
    for (const { status, duplicate } of answers) {
      finals[status] = (finals[status] ?? 0) + 1;
      if (status === 204) {
        if (duplicate) duplicateAnswers++;
        else ranAnswers++;
      }
    }
    if (SQLITE && n % Math.floor(TOTAL / 4) === 0) sizes.push([n, fileBytes()]);
    if (n === WARMUP) {
      for (const [i, receiver] of receivers.entries()) {
        await receiver.ask("gc", "gc");
        const warm = await receiver.ask("stats", "rss");
        rssAfterWarmup[i] = warm.rss;
        heapAfterWarmup[i] = warm.heap;
      }
    }
  }
}
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
const seconds = (Date.now() - started) / 1000;
await sleep(200); // let the last releases land
// No prune while the ids are counted: each id is then in the inbox or counted as pruned, once.
if (SQLITE) for (const receiver of receivers) await receiver.ask("stop-prune", "stopped");
const stats = [];
for (const receiver of receivers) {
  await receiver.ask("gc", "gc");
  stats.push(await receiver.ask("stats", "rss"));
}
const effectsSql =
  "select count(*) as rows, count(distinct event_id) as ids, " +
  "count(*) filter (where event_id not like 'evt_%') as \"foreign\" from soak_effects";
const effects = SQLITE ? sqlite.prepare(effectsSql).get() : (await admin.query(effectsSql)).rows[0];
for (const key of Object.keys(effects)) effects[key] = Number(effects[key]);
const inboxSql = "select count(*) as n from flag_webhooks_inbox where scope = 'soak'";
const inboxRows = Number(SQLITE ? sqlite.prepare(inboxSql).get().n : (await admin.query(inboxSql)).rows[0].n);
const openTx = SQLITE
  ? 0
  : (await admin.query("select count(*)::int as n from pg_stat_activity where state like 'idle in transaction%'"))
      .rows[0].n;
// SQLite: every id is either still in the inbox or was pruned; the file, pruned once more after
// the retention has passed, holds none, and its size is what the freed pages leave.
const pruned = stats.reduce((sum, s) => sum + (s.pruned ?? 0), 0);
let finalPrune = 0;
if (SQLITE) {
  sizes.push([TOTAL, fileBytes()]);
  // Once the retention of the last ids has passed, prune() leaves none.
  await sleep(RETENTION + 500);
  const { SqliteInbox } = await import("../dist/sqlite.js");
  finalPrune = await new SqliteInbox(sqlite, { scope: "soak" }).prune();
  sqlite.pragma("wal_checkpoint(truncate)");
}
for (const receiver of receivers) {
  receiver.child.send("exit");
  receiver.agent.destroy();
}
await admin?.end();
clearTimeout(timer);

// ------------------------------------------------------------------------------------ report

const copies = 2 * TOTAL;
const retryCount = Object.values(retries).reduce((a, b) => a + b, 0);
const nonOk = Object.entries(finals)
  .filter(([status]) => status !== "204")
  .reduce((sum, [, n]) => sum + n, 0);
const statements = stats.reduce((sum, s) => sum + s.statements - 0, 0);
const runs = stats.reduce((sum, s) => sum + s.runs, 0);
const cpuMicros = stats.reduce((sum, s, i) => {
  const before = cpuStart[i].cpu;
  return sum + (s.cpu.user - before.user) + (s.cpu.system - before.system);
}, 0);
// New delivery: check, BEGIN, insert, the handler's insert, COMMIT = 5; duplicate: 1; a copy
// that waited for its twin's transaction: check, BEGIN, insert (nothing), ROLLBACK, check = 5.
console.log(
  `valid deliveries: ${TOTAL}, each sent twice (${copies} copies; ${concurrentPairs} pairs at the same moment), ` +
    `at ${CONCURRENCY} connections to two receivers on one ${SQLITE ? "SQLite file (WAL)" : "PostgreSQL"}, in ${seconds.toFixed(1)}s ` +
    `(${Math.round((copies + retryCount) / seconds)} req/s; receivers' CPU ${(cpuMicros / (copies + retryCount)).toFixed(0)} µs per request)`,
);
console.log(
  `final answers after retries: ${JSON.stringify(finals)} (non-2xx: ${nonOk}); retries ${JSON.stringify(retries)}`,
);
console.log(`answers: ${ranAnswers} handled, ${duplicateAnswers} "webhook-duplicate: true"; handler runs ${runs}`);
console.log(
  `soak_effects: ${effects.rows} rows for ${effects.ids} distinct ids (expected ${TOTAL} and ${TOTAL}), foreign ${effects.foreign}; ` +
    `inbox rows ${inboxRows}; transactions left open ${openTx}`,
);
if (SQLITE) {
  console.log(
    `SQLite: inbox rows at the end ${inboxRows}, pruned during the run ${pruned} (sum ${inboxRows + pruned}, expected ${TOTAL}); ` +
      `retention ${RETENTION} ms; file + WAL bytes at ${sizes.map(([n, bytes]) => `${n}: ${(bytes / 1048576).toFixed(1)} MB`).join(", ")}; ` +
      `after a last prune (${finalPrune} ids) and a checkpoint: ${(fileBytes() / 1048576).toFixed(1)} MB`,
  );
} else {
  console.log(
    `statements (round trips) sent by both receivers: ${statements}, ${(statements / (copies + retryCount)).toFixed(2)} per request ` +
      `(5 per new delivery with the handler's insert, 1 per duplicate: expected about ${5 * TOTAL + TOTAL})`,
  );
}
for (const [i, s] of stats.entries()) {
  const growth = (s.rss - rssAfterWarmup[i]) / 1048576;
  console.log(
    `receiver ${receivers[i].name}: RSS ${(rssAfterWarmup[i] / 1048576).toFixed(1)} MB after ${WARMUP} warm-up deliveries, ` +
      `${(s.rss / 1048576).toFixed(1)} MB at the end (growth ${growth.toFixed(1)} MB, limit 20 MB; after a full GC each time); ` +
      `heap used ${(heapAfterWarmup[i] / 1048576).toFixed(1)} -> ${(s.heap / 1048576).toFixed(1)} MB; ` +
      `pool ${JSON.stringify(s.pool)}; errors reported ${s.reported.length}${s.reported.length ? ` ${JSON.stringify(s.reported.slice(0, 3))}` : ""}`,
  );
}
const memoryChecked = TOTAL >= 50_000;
if (!memoryChecked) console.log("memory check: not enforced below 50,000 deliveries (warm-up too short)");
const ok =
  nonOk === 0 &&
  effects.rows === TOTAL &&
  effects.ids === TOTAL &&
  effects.foreign === 0 &&
  ranAnswers === TOTAL &&
  duplicateAnswers === TOTAL &&
  runs === TOTAL &&
  (SQLITE ? inboxRows + pruned === TOTAL && finalPrune === inboxRows : inboxRows === TOTAL) &&
  openTx === 0 &&
  stats.every((s) => s.reported.length === 0 && s.pool.idle === s.pool.total && s.pool.waiting === 0) &&
  (!memoryChecked || stats.every((s, i) => (s.rss - rssAfterWarmup[i]) / 1048576 < 20));
const which = SQLITE ? "SQLite inbox" : "Postgres inbox";
console.log(ok ? `soak (${which}): passed` : `soak (${which}): FAILED`);
await stopAll();
process.exit(ok ? 0 : 1);
