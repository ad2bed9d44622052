// Keep then work, one delivery at a time on SQLite (better-sqlite3, WAL, synchronous = NORMAL,
// the driver's default busy_timeout of 5 s): the CPU and the instructions each delivery costs,
// `enqueue()` against the hand-written receiver (the inbox's own upsert, autocommitted), next to
// the raw shapes a lone keep can take (the same statements by hand, without the library's JS).
// Under `synchronous = NORMAL` a COMMIT costs little, so this is where the inbox's own work shows.
//
//   nice -n 10 node bench/keep-alone.mjs                  # CPU per delivery, sides interleaved
//   node bench/keep-alone.mjs --instructions              # valgrind: instructions per delivery
//
// CPU: rounds of BENCH_ALONE_BATCH deliveries per side (BENCH_ALONE_ROUNDS rounds, sides in
// reverse order every other round), user + system CPU per delivery; per side the median, and the
// median of its per-round ratio to the hand-written receiver (hand CPU ÷ side CPU: above 1 is
// cheaper). Instructions: each side in a process of its own under `valgrind --tool=callgrind`,
// run for N and for 6N deliveries after the same warm-up; (I(6N) − I(N)) ÷ 5N per delivery, so
// start-up and warm-up cancel out. "enqueue(), keepOn" keeps on a second connection of its own. Env: FLAG_WEBHOOKS_DIST, BENCH_ALONE_SIDES (names, separated by ";").
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { distUrl, fmt, fmtRatio, machine, median, QUICK, table } from "./lib.mjs";

const { createEvent } = await import(distUrl("testing.js"));
const { SqliteInbox } = await import(distUrl("sqlite.js"));
// Another build's inbox, measured as a side of its own ("enqueue(), before"): e.g. main's.
const before = process.env.BENCH_ALONE_BEFORE && (await import(distUrl("sqlite.js", process.env.BENCH_ALONE_BEFORE)));
const RAW = Symbol.for("flag-webhooks.raw-body");
const ROUNDS = Number(process.env.BENCH_ALONE_ROUNDS) || (QUICK ? 4 : 40);
const BATCH = Number(process.env.BENCH_ALONE_BATCH) || 200;
const COUNT = QUICK ? 200 : 2000;

let serial = 0;
/** A fresh verified event, as the receiver hands it to onEvent: parsed, with the bytes it verified. */
function verified() {
  const event = createEvent("flag.updated", { id: `evt_alone_${process.pid}_${serial++}` });
  Object.defineProperty(event, RAW, { value: new TextEncoder().encode(JSON.stringify(event)) });
  return event;
}

const UPSERT = `insert into flag_webhooks_inbox (scope, id, state, token, expires_at, handled_at,
    body, type, created_at, received_at, attempts, next_at, last_error, lease_until, trace_context)
  values (?, ?, 'pending', null, 9223372036854775807, (?), ?, ?, ?, ?, 0, ?, null, null, null)
  on conflict (scope, id) do update set state = 'pending', token = null, expires_at = excluded.expires_at,
    handled_at = excluded.handled_at, body = excluded.body, type = excluded.type, created_at = excluded.created_at,
    received_at = excluded.received_at, attempts = 0, next_at = excluded.next_at, last_error = null,
    lease_until = null, trace_context = excluded.trace_context
  where flag_webhooks_inbox.expires_at <= excluded.handled_at
  returning id`;

/** The sides, on one connection: each keeps one verified event, committed, before it returns. */
async function sides(db) {
  const inbox = new SqliteInbox(db, { scope: "bench" });
  await inbox.migrate();
  const earlier = before && new before.SqliteInbox(db, { scope: "bench-before" });
  // keepOn: a second connection to the file, the inbox's own, with the same durability.
  const second = new Database(db.name);
  second.pragma("synchronous = normal");
  const own = new SqliteInbox(db, { scope: "bench-keep-on", keepOn: second });
  const upsert = db.prepare(UPSERT);
  const keep = (scope, event) => {
    const now = Date.now();
    return upsert.all(
      scope,
      event.id,
      now,
      new TextDecoder().decode(event[RAW]),
      event.type,
      event.createdAt,
      now,
      now,
    );
  };
  const prepared = (sql) => db.prepare(sql);
  const [begin, immediate, commit, read] = [
    "begin",
    "begin immediate",
    "commit",
    "select 1 from flag_webhooks_inbox limit 0",
  ].map(prepared);
  const journal = db.prepare("pragma journal_mode").pluck();
  const version = db.prepare("pragma data_version").pluck();
  const timeout = db.prepare("pragma busy_timeout").pluck();
  return {
    hand: (event) => keep("hand", event),
    "enqueue()": inbox.enqueue(),
    "enqueue(), keepOn": own.enqueue(),
    ...(earlier && { "enqueue(), before": earlier.enqueue() }),
    // The library's shape today, by hand: the busy_timeout read, then 0 for BEGIN IMMEDIATE and COMMIT.
    "raw: busy_timeout 0, BEGIN IMMEDIATE": (event) => {
      const previous = timeout.get();
      db.exec("pragma busy_timeout = 0; begin immediate");
      const rows = keep("raw-today", event);
      db.exec(`commit; pragma busy_timeout = ${previous}`);
      return rows;
    },
    "raw: BEGIN IMMEDIATE (waits by busy_timeout)": (event) => {
      immediate.run();
      const rows = keep("raw-immediate", event);
      commit.run();
      return rows;
    },
    "raw: BEGIN, read, upsert": (event) => {
      begin.run();
      read.get();
      const rows = keep("raw-deferred", event);
      commit.run();
      return rows;
    },
    // The library's shape on WAL: its read is the data_version (compiled once, unlike journal_mode).
    "raw: BEGIN, data_version, upsert": (event) => {
      begin.run();
      version.get();
      const rows = keep("raw-version", event);
      commit.run();
      return rows;
    },
    "raw: journal_mode, BEGIN, read, upsert": (event) => {
      if (journal.get() !== "wal") throw new Error("not WAL");
      begin.run();
      read.get();
      const rows = keep("raw-deferred-mode", event);
      commit.run();
      return rows;
    },
  };
}

function open() {
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-bench-alone-"));
  const db = new Database(join(dir, "inbox.db"));
  db.pragma("journal_mode = wal");
  db.pragma("synchronous = normal");
  const close = () => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { db, close };
}

async function run(side, n) {
  for (let i = 0; i < n; i++) await side(verified());
}

async function cpu() {
  const { db, close } = open();
  const all = await sides(db);
  const names = Object.keys(all).filter(
    (name) =>
      !process.env.BENCH_ALONE_SIDES || process.env.BENCH_ALONE_SIDES.split(";").includes(name) || name === "hand",
  );
  const per = Object.fromEntries(names.map((name) => [name, []]));
  for (const name of names) await run(all[name], COUNT); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of round % 2 ? [...names].reverse() : names) {
      const start = process.cpuUsage();
      await run(all[name], BATCH);
      const used = process.cpuUsage(start);
      per[name].push((used.user + used.system) / BATCH);
    }
  }
  close();
  return names.map((name) => {
    const ratios = per[name].map((us, round) => per.hand[round] / us);
    return [
      name,
      `${median(per[name]).toFixed(1)}`,
      `${fmtRatio(median(ratios))}`,
      `${fmtRatio(Math.min(...ratios))}–${fmtRatio(Math.max(...ratios))}`,
    ];
  });
}

/** In a child under valgrind: COUNT deliveries of warm-up, then `n` of `name`. */
async function child(name, n) {
  const { db, close } = open();
  const side = (await sides(db))[name];
  await run(side, COUNT);
  await run(side, n);
  close();
}

function instructions(name, n) {
  const out = join(mkdtempSync(join(tmpdir(), "flag-webhooks-callgrind-")), "out");
  execFileSync(
    "valgrind",
    [
      "--tool=callgrind",
      `--callgrind-out-file=${out}`,
      process.execPath,
      fileURLToPath(import.meta.url),
      "--child",
      name,
      String(n),
    ],
    { stdio: ["ignore", "ignore", "ignore"], env: process.env },
  );
  const total = /^summary:\s+(\d+)/m.exec(readFileSync(out, "utf8"));
  rmSync(dirname(out), { recursive: true, force: true });
  return Number(total[1]);
}

const args = process.argv.slice(2);
if (args[0] === "--child") await child(args[1], Number(args[2]));
else if (args[0] === "--instructions") {
  const { db, close } = open();
  const names = Object.keys(await sides(db)).filter(
    (name) =>
      !process.env.BENCH_ALONE_SIDES || process.env.BENCH_ALONE_SIDES.split(";").includes(name) || name === "hand",
  );
  close();
  const n = Number(process.env.BENCH_ALONE_N) || (QUICK ? 200 : 1000);
  const rows = names.map((name) => [name, (instructions(name, 6 * n) - instructions(name, n)) / (5 * n)]);
  const hand = rows[0][1];
  console.log(
    table(
      ["side", "instructions / delivery", "hand ÷ side"],
      rows.map(([name, per]) => [name, fmt(Math.round(per)), fmtRatio(hand / per)]),
      ["l", "r", "r"],
    ),
  );
} else {
  console.log(
    `${machine()}; ${ROUNDS} rounds of ${BATCH} deliveries per side, interleaved; load ${(await import("node:os"))
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(
    table(["side", "CPU µs / delivery (median)", "hand ÷ side (median of rounds)", "rounds min–max"], await cpu(), [
      "l",
      "r",
      "r",
      "r",
    ]),
  );
}
