// Keep then work, measured: how many deliveries per second `inbox.enqueue()` accepts (keeps and
// commits, as before its 202) against a hand-written receiver doing the same INSERT and COMMIT with
// the same driver and durability settings, one caller at a time and many at once, with group
// commit (the default: deliveries that arrive while a COMMIT is in flight share the next) and
// without (`groupCommit: false`, one COMMIT each); and how many events per second a worker does
// with a 0 ms handler. No HTTP: each side is called with the verified event as the receiver hands
// it over (its raw body attached), so the ratio is the inbox's own cost. Postgres (pg, a server
// started here through the tests' launcher, fsync and synchronous_commit on) and SQLite
// (better-sqlite3, a WAL file, synchronous = FULL, then NORMAL). Rounds alternate the sides (in
// reverse order every other round); each figure is the median of the rounds, with their min–max.
//
//   nice -n 10 node bench/keep.mjs          # ~4 min
//   BENCH_QUICK=1 node bench/keep.mjs       # smoke run
//
// Env: FLAG_WEBHOOKS_DIST, BENCH_KEEP_SECONDS (per round, default 2), BENCH_KEEP_ROUNDS (3),
// BENCH_KEEP_CONCURRENCY (callers at once, default 32), BENCH_KEEP_ONLY (runs, e.g. sqlite-normal),
// BENCH_RESULTS_FILE (append the markdown).
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distUrl, fmt, fmtRatio, machine, median, QUICK, table } from "./lib.mjs";

const SECONDS = Number(process.env.BENCH_KEEP_SECONDS) || (QUICK ? 0.5 : 2);
const ROUNDS = Number(process.env.BENCH_KEEP_ROUNDS) || (QUICK ? 1 : 3);
const CONCURRENCY = Number(process.env.BENCH_KEEP_CONCURRENCY) || 32;
const WORKER_EVENTS = QUICK ? 300 : 1000;

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

/** Calls `accept` from `callers` callers at once for SECONDS; resolves with accepts per second. */
async function rate(accept, callers) {
  let count = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: callers }, async () => {
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
  // pg's default pool size, for both sides.
  const pool = new pg.Pool({ connectionString: server.url, max: 10 });
  try {
    const inbox = new PostgresInbox(pool, { scope: "bench" });
    await inbox.migrate();
    // The hand-written receiver: one INSERT of the same row into the same table, autocommitted.
    const insert = `insert into flag_webhooks_inbox (scope, id, state, token, expires_at, handled_at, body, type,
        created_at, received_at, attempts, next_at)
      values ('hand', $1, 'pending', null, 'infinity', to_timestamp($5::float8 / 1000), $2, $3, $4, $5, 0, $5)
      on conflict (scope, id) do nothing returning 1`;
    const hand = (event) => pool.query(insert, row(event));
    return await measure(
      { name: "Postgres 15 (pg 8, pool of 10)", settings: "`fsync = on`, `synchronous_commit = on`" },
      inbox,
      hand,
      8,
    );
  } finally {
    await pool.end();
    await stopPostgres(server);
  }
}

async function sqlite(synchronous) {
  const { default: Database } = await import("better-sqlite3");
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-bench-keep-"));
  const db = new Database(join(dir, "inbox.db"));
  db.pragma("journal_mode = wal");
  db.pragma(`synchronous = ${synchronous}`);
  try {
    const inbox = new SqliteInbox(db, { scope: "bench" });
    await inbox.migrate();
    // The hand-written receiver runs the inbox's own INSERT (an upsert that revives an id handled
    // past its retention, 15 columns), autocommitted: "the same INSERT and COMMIT", so the ratio is
    // the inbox's work around it (its 1.2–1.3× dearer statement is not counted against it).
    const statement = db.prepare(`insert into flag_webhooks_inbox (scope, id, state, token, expires_at, handled_at,
        body, type, created_at, received_at, attempts, next_at, last_error, lease_until, trace_context)
      values ('hand', ?, 'pending', null, 9223372036854775807, (?), ?, ?, ?, ?, 0, ?, null, null, null)
      on conflict (scope, id) do update set state = 'pending', token = null, expires_at = excluded.expires_at,
        handled_at = excluded.handled_at, body = excluded.body, type = excluded.type, created_at = excluded.created_at,
        received_at = excluded.received_at, attempts = 0, next_at = excluded.next_at, last_error = null,
        lease_until = null, trace_context = excluded.trace_context
      where flag_webhooks_inbox.expires_at <= excluded.handled_at
      returning id`);
    const hand = async (event) => {
      const [id, body, type, createdAt, now] = row(event);
      return statement.all(id, now, body, type, createdAt, now, now);
    };
    return await measure(
      { name: "SQLite (better-sqlite3)", settings: `WAL, \`synchronous = ${synchronous.toUpperCase()}\`` },
      inbox,
      hand,
      1,
    );
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every side at 1 caller and at CONCURRENCY callers, then the worker. */
async function measure(about, inbox, hand, workerConcurrency) {
  const sides = { hand, grouped: inbox.enqueue(), alone: inbox.enqueue({ groupCommit: false }) };
  const runs = [];
  for (const callers of [1, CONCURRENCY]) runs.push({ callers, ...(await alternate(sides, callers)) });
  const worked = await workerRate(inbox, sides.grouped, workerConcurrency);
  return { ...about, runs, worked, workers: `1 worker, concurrency ${workerConcurrency}` };
}

/**
 * Rounds of every side, alternated (reversed every other round); per side, its rates, and its
 * ratio to the hand-written receiver in each round (the two measured next to each other).
 */
async function alternate(sides, callers) {
  const names = Object.keys(sides);
  const rates = Object.fromEntries(names.map((name) => [name, []]));
  for (const name of names) await rate(sides[name], callers); // warm-up, not counted
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...names].reverse() : names;
    for (const name of order) rates[name].push(await rate(sides[name], callers));
  }
  const ratios = (name) => rates[name].map((value, round) => value / rates.hand[round]);
  return { rates, ratios: Object.fromEntries(names.map((name) => [name, ratios(name)])) };
}

/** Keeps WORKER_EVENTS events, then times one worker doing them all with a 0 ms handler. */
async function workerRate(inbox, keep, concurrency) {
  // Only these events: the ones the accept rounds kept are deleted first.
  await inbox.purge({ state: "pending" });
  for (let i = 0; i < WORKER_EVENTS; i++) await keep(verified());
  const worker = inbox.work(() => {}, { interval: false, concurrency });
  const start = performance.now();
  let done = 0;
  for (let ran = await worker.drain(); ran > 0; ran = await worker.drain()) done += ran;
  const seconds = (performance.now() - start) / 1000;
  await worker.close();
  return done / seconds;
}

const range = (values) => `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;
const ratioRange = (values) => `${fmtRatio(Math.min(...values))}–${fmtRatio(Math.max(...values))}`;
// BENCH_KEEP_ONLY: a comma list of the runs to make (postgres, sqlite-full, sqlite-normal), all by default.
const runs = {
  postgres: () => postgres(),
  "sqlite-full": () => sqlite("full"),
  "sqlite-normal": () => sqlite("normal"),
};
const only = process.env.BENCH_KEEP_ONLY?.split(",") ?? Object.keys(runs);
const results = [];
for (const name of only) {
  if (!runs[name]) throw new Error(`BENCH_KEEP_ONLY: no run named ${name} (${Object.keys(runs).join(", ")})`);
  results.push(await runs[name]());
}
const markdown = [
  "## Keep then work: accepts and worker throughput",
  "",
  `${machine()}; ${ROUNDS} rounds of ${SECONDS} s, sides alternated, medians and min–max over rounds (\`nice -n 10 node bench/keep.mjs\`).`,
  "",
  table(
    [
      "database",
      "durability",
      "callers at once",
      "hand-written INSERT + COMMIT /s",
      "`enqueue()`, group commit /s",
      "÷ hand (per round)",
      "`enqueue({ groupCommit: false })` /s",
      "÷ hand (per round)",
    ],
    results.flatMap((r) =>
      r.runs.map(({ callers, rates, ratios }) => [
        r.name,
        r.settings,
        String(callers),
        `${fmt(median(rates.hand))} (${range(rates.hand)})`,
        `${fmt(median(rates.grouped))} (${range(rates.grouped)})`,
        `${fmtRatio(median(ratios.grouped))} (${ratioRange(ratios.grouped)})`,
        `${fmt(median(rates.alone))} (${range(rates.alone)})`,
        `${fmtRatio(median(ratios.alone))} (${ratioRange(ratios.alone)})`,
      ]),
    ),
    ["l", "l", "r", "r", "r", "r", "r", "r"],
  ),
  "",
  table(
    ["database", "durability", "worker, 0 ms handler: events done /s"],
    results.map((r) => [r.name, r.settings, `${fmt(r.worked)} (${r.workers})`]),
    ["l", "l", "r"],
  ),
  "",
].join("\n");
console.log(markdown);
if (process.env.BENCH_RESULTS_FILE) appendFileSync(process.env.BENCH_RESULTS_FILE, `\n${markdown}`);
