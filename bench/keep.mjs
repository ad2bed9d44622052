// Keep then work, measured: how many deliveries per second `inbox.enqueue()` accepts (keeps and
// commits, as before its 202) against a hand-written receiver doing the same INSERT and COMMIT with
// the same driver and durability settings, and how many events per second a worker does with a
// 0 ms handler. No HTTP: both sides are called with the verified event as the receiver hands it
// over (its raw body attached), so the ratio is the inbox's own cost. Postgres (pg, a server
// started here through the tests' launcher, fsync and synchronous_commit on) and SQLite
// (better-sqlite3, a WAL file, synchronous = FULL: a COMMIT is on disk before it returns).
// Rounds alternate the two sides; each figure is the median of the rounds, in one run.
//
//   node bench/keep.mjs                 # ~2 min
//   BENCH_QUICK=1 node bench/keep.mjs   # smoke run
//
// Env: FLAG_WEBHOOKS_DIST, BENCH_KEEP_SECONDS (per round, default 3), BENCH_KEEP_ROUNDS (3),
// BENCH_KEEP_CONCURRENCY (callers at once, default 10), BENCH_RESULTS_FILE (append the markdown).
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distUrl, fmt, fmtRatio, machine, median, QUICK, table } from "./lib.mjs";

const SECONDS = Number(process.env.BENCH_KEEP_SECONDS) || (QUICK ? 1 : 3);
const ROUNDS = Number(process.env.BENCH_KEEP_ROUNDS) || (QUICK ? 1 : 3);
const CONCURRENCY = Number(process.env.BENCH_KEEP_CONCURRENCY) || 10;
const WORKER_EVENTS = QUICK ? 500 : 3000;

const { createEvent } = await import(distUrl("testing.js"));
const { PostgresInbox } = await import(distUrl("postgres.js"));
const { SqliteInbox } = await import(distUrl("sqlite.js"));
const RAW = Symbol.for("flag-webhooks.raw-body");

let serial = 0;
/** A fresh verified event, as the receiver hands it to onEvent: parsed, with the bytes it verified. */
function verified() {
  const event = createEvent("flag.updated", { id: `evt_bench_${process.pid}_${serial++}` });
  const bytes = new TextEncoder().encode(JSON.stringify(event));
  Object.defineProperty(event, RAW, { value: bytes });
  return event;
}

/** Calls `accept` from CONCURRENCY callers for SECONDS; resolves with accepts per second. */
async function rate(accept) {
  let count = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await accept(verified());
        count++;
      }
    }),
  );
  return count / SECONDS;
}

/** The columns a hand-written receiver keeps, as the inbox does: the body as received and its fields. */
const row = (event) => [event.id, new TextDecoder().decode(event[RAW]), event.type, event.createdAt, Date.now()];

async function postgres() {
  const { default: pg } = await import("pg");
  const { tsImport } = await import("tsx/esm/api");
  const { startPostgres, stopPostgres } = await tsImport("../test/support/postgres-server.ts", import.meta.url);
  const server = await startPostgres({ fsync: "on", synchronous_commit: "on" });
  const pool = new pg.Pool({ connectionString: server.url, max: CONCURRENCY });
  try {
    const inbox = new PostgresInbox(pool, { scope: "bench" });
    await inbox.migrate();
    const keep = inbox.enqueue();
    // The hand-written receiver: one INSERT of the same row into the same table, autocommitted.
    const insert = `insert into flag_webhooks_inbox (scope, id, state, token, expires_at, handled_at, body, type,
        created_at, received_at, attempts, next_at)
      values ('hand', $1, 'pending', null, 'infinity', to_timestamp($5::float8 / 1000), $2, $3, $4, $5, 0, $5)
      on conflict (scope, id) do nothing returning 1`;
    const hand = (event) => pool.query(insert, row(event));
    const accepts = await alternate(hand, keep);
    const worked = await workerRate(inbox, keep, 8);
    return {
      name: "Postgres (pg)",
      settings: "fsync on, synchronous_commit on",
      ...accepts,
      worked,
      workers: "1 worker, concurrency 8",
    };
  } finally {
    await pool.end();
    await stopPostgres(server);
  }
}

async function sqlite() {
  const { default: Database } = await import("better-sqlite3");
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-bench-keep-"));
  const db = new Database(join(dir, "inbox.db"));
  db.pragma("journal_mode = wal");
  db.pragma("synchronous = full");
  try {
    const inbox = new SqliteInbox(db, { scope: "bench" });
    await inbox.migrate();
    const keep = inbox.enqueue();
    const statement = db.prepare(`insert into flag_webhooks_inbox (scope, id, state, token, expires_at, handled_at,
        body, type, created_at, received_at, attempts, next_at)
      values ('hand', ?, 'pending', null, 9223372036854775807, ?, ?, ?, ?, ?, 0, ?)
      on conflict (scope, id) do nothing returning 1`);
    const hand = async (event) => {
      const [id, body, type, createdAt, now] = row(event);
      return statement.get(id, now, body, type, createdAt, now, now);
    };
    const accepts = await alternate(hand, keep);
    const worked = await workerRate(inbox, keep, 1);
    return {
      name: "SQLite (better-sqlite3)",
      settings: "WAL, synchronous = FULL",
      ...accepts,
      worked,
      workers: "1 worker",
    };
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Rounds of the hand-written receiver and of enqueue(), alternated; the medians and their ratio. */
async function alternate(hand, keep) {
  const hands = [];
  const keeps = [];
  await rate(hand); // warm-up of both, not counted
  await rate(keep);
  for (let round = 0; round < ROUNDS; round++) {
    hands.push(await rate(hand));
    keeps.push(await rate(keep));
  }
  return { hand: median(hands), keep: median(keeps), ratio: median(keeps) / median(hands) };
}

/** Keeps WORKER_EVENTS events, then times one worker doing them all with a 0 ms handler. */
async function workerRate(inbox, keep, concurrency) {
  for (let i = 0; i < WORKER_EVENTS; i++) await keep(verified());
  const worker = inbox.work(() => {}, { interval: false, concurrency });
  const start = performance.now();
  let done = 0;
  for (let ran = await worker.drain(); ran > 0; ran = await worker.drain()) done += ran;
  const seconds = (performance.now() - start) / 1000;
  await worker.close();
  return done / seconds;
}

const results = [await postgres(), await sqlite()];
const markdown = [
  "## Keep then work: accepts and worker throughput",
  "",
  `${machine()}; ${CONCURRENCY} callers at once, ${ROUNDS} rounds of ${SECONDS} s alternated, medians (\`node bench/keep.mjs\`).`,
  "",
  table(
    [
      "database",
      "durability",
      "hand-written INSERT + COMMIT /s",
      "`enqueue()` /s",
      "ratio",
      "worker, 0 ms handler: events done /s",
    ],
    results.map((r) => [
      r.name,
      r.settings,
      fmt(r.hand),
      fmt(r.keep),
      fmtRatio(r.ratio),
      `${fmt(r.worked)} (${r.workers})`,
    ]),
    ["l", "l", "r", "r", "r", "r"],
  ),
  "",
].join("\n");
console.log(markdown);
if (process.env.BENCH_RESULTS_FILE) appendFileSync(process.env.BENCH_RESULTS_FILE, `\n${markdown}`);
