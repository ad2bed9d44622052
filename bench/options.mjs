// The cost of each receiver option on the HTTP path, as a ratio to the same receiver without it:
// flag-webhooks/express on plain node:http with onEvent, and maxAge, a MemoryDedupeStore or a
// RedisDedupeStore (ioredis, node-redis) on a redis-server this script starts on loopback and
// stops by pid. Every request carries a new event id (a new body, signed per request), so the
// dedupe cases measure the successful path: claim, handler, mark done; the "duplicate" cases send
// one id over and over. Redis round trips per response are counted with INFO commandstats. The
// Postgres cases (flag-webhooks/postgres: the inbox's handle(), its duplicate, and the inbox as a
// DedupeStore) run on a PostgreSQL started here through the tests' launcher (loaded with tsx),
// their round trips counted as the statements the receiver's pg clients send. The SQLite cases
// (flag-webhooks/sqlite: the inbox's handle() and its duplicate) run on better-sqlite3 over a WAL
// file made here; the "-20ms" cases give the memory store, the Postgres inbox and the SQLite inbox
// a handler that awaits 20 ms: what one writer costs when handlers wait.
//
// The telemetry cases: `telemetry: openTelemetry()` with @opentelemetry/api and no SDK
// registered, and with the SDK registered (spans and metrics to exporters that drop them).
//
//   node bench/options.mjs                  # ~4 min
//   BENCH_QUICK=1 node bench/options.mjs    # smoke run
//
// Env: FLAG_WEBHOOKS_DIST, BENCH_HTTP_DURATION, BENCH_HTTP_WARMUP, BENCH_HTTP_CONNECTIONS,
// BENCH_OPTIONS_ROUNDS (default 4), BENCH_OPTIONS_CASES (comma-separated; baseline always runs),
// BENCH_RESULTS_FILE (append the markdown there).
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import {
  distDir,
  distUrl,
  fmt,
  fmtRatio,
  killServers,
  machine,
  median,
  QUICK,
  SECRET,
  spread,
  startServer,
  stopServer,
  table,
} from "./lib.mjs";

const DURATION = Number(process.env.BENCH_HTTP_DURATION) || (QUICK ? 1 : 5);
const WARMUP = Number(process.env.BENCH_HTTP_WARMUP ?? (QUICK ? 0.5 : 2));
const CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS) || 10;
const ROUNDS = Number(process.env.BENCH_OPTIONS_ROUNDS) || (QUICK ? 1 : 4);
const BODY_SIZE = 2048;
const PATH = "/webhooks";

const ALL_CASES = [
  { id: "baseline", name: "no option (baseline)" },
  { id: "max-age", name: '`maxAge: "1h"`', target: 0.97 },
  { id: "memory", name: "`dedupe` on a full `MemoryDedupeStore`, new id each request", target: 0.97 },
  { id: "memory-duplicate", name: "`dedupe` on a full `MemoryDedupeStore`, the same id each request", duplicate: true },
  { id: "redis-ioredis", name: "`dedupe` on `RedisDedupeStore` (ioredis 6), new id each request", redis: 2 },
  { id: "redis-node-redis", name: "`dedupe` on `RedisDedupeStore` (node-redis 5), new id each request", redis: 2 },
  {
    id: "redis-duplicate",
    name: "`dedupe` on `RedisDedupeStore` (ioredis 6), the same id each request",
    duplicate: true,
    redis: 1,
  },
  // flag-webhooks/postgres on a PostgreSQL this script starts (test/support/postgres-server.ts).
  {
    id: "postgres-inbox",
    name: "`PostgresInbox.handle()` (pg Pool), new id each request, the handler in its transaction",
    postgres: 2,
  },
  {
    id: "postgres-duplicate",
    name: "`PostgresInbox.handle()` (pg Pool), the same id each request",
    duplicate: true,
    // One read outside any transaction: the inbox handled this id (the probe before timing).
    postgres: 1,
    // Copies of a handled id are answered from what is committed, without waiting on the row's
    // lock: at least as fast as new ids (run with BENCH_HTTP_CONNECTIONS=50 to see copies contend).
    against: "postgres-inbox",
  },
  {
    id: "postgres-store",
    name: "`dedupe` on `PostgresInbox` as a `DedupeStore` (pg Pool), new id each request",
    postgres: 2,
  },
  // Each store with a handler that awaits 20 ms (a call to another service, say): a MemoryDedupeStore
  // runs them side by side; PostgresInbox holds one connection each (a Pool of 10); the SQLite inbox
  // has one writer, and a transaction held while its handler awaits makes the next one wait.
  { id: "memory-20ms", name: "`dedupe` on a full `MemoryDedupeStore`, new id each request, a 20 ms handler" },
  {
    id: "postgres-inbox-20ms",
    name: "`PostgresInbox.handle()` (pg Pool), new id each request, a 20 ms handler in its transaction",
    postgres: 2,
  },
  // flag-webhooks/sqlite on a better-sqlite3 12 connection to a WAL file this script makes.
  {
    id: "sqlite-inbox",
    name: "`SqliteInbox.handle()` (better-sqlite3, a WAL file), new id each request, the handler in its transaction",
  },
  {
    id: "sqlite-duplicate",
    name: "`SqliteInbox.handle()` (better-sqlite3, a WAL file), the same id each request",
    duplicate: true,
    against: "sqlite-inbox",
  },
  {
    id: "sqlite-inbox-20ms",
    name: "`SqliteInbox.handle()` (better-sqlite3, a WAL file), new id each request, a 20 ms handler in its transaction",
  },
  {
    id: "otel-api",
    name: "`telemetry: openTelemetry()`, `@opentelemetry/api` without an SDK",
    target: 0.98,
  },
  { id: "otel-sdk", name: "`telemetry: openTelemetry()` with the SDK (batch span processor, metric reader)" },
];
const only = process.env.BENCH_OPTIONS_CASES?.split(",").map((id) => id.trim());
if (only?.some((id) => !ALL_CASES.some((c) => c.id === id))) {
  throw new Error(`BENCH_OPTIONS_CASES: unknown case; known: ${ALL_CASES.map((c) => c.id).join(", ")}`);
}
const CASES = only ? ALL_CASES.filter((c) => only.includes(c.id) || c.id === "baseline") : ALL_CASES;

const log = (message) => process.stderr.write(`${message}\n`);

// ------------------------------------------------------------------------------ deliveries

const createdAt = new Date().toISOString(); // fresh, so maxAge passes
let run = 0;
let serial = 0;
/** A valid `flag.updated` event with this id, padded with JSON whitespace to BODY_SIZE bytes. */
function eventBody(id) {
  const json =
    `{"id":"${id}","type":"flag.updated","createdAt":"${createdAt}","environment":"production",` +
    '"data":{"flag":"new-checkout","changes":[{"path":"on","from":false,"to":true}],' +
    '"actor":{"type":"user","email":"dana@example.com"}}}';
  return Buffer.from(json.padEnd(BODY_SIZE, " "));
}
/** Ids of one width, so every body has the same size; a duplicate case sends one id. */
function nextId(duplicate) {
  return duplicate ? `evt_${run}_duplicate_____` : `evt_${run}_${String(serial++).padStart(16, "0")}`;
}
function signedRequest(duplicate) {
  const body = eventBody(nextId(duplicate));
  return {
    method: "POST",
    path: PATH,
    body,
    headers: {
      "content-type": "application/json",
      "service-signature": createHmac("sha256", SECRET).update(body).digest("hex"),
    },
  };
}

// ----------------------------------------------------------------------------- redis-server

let redis;
let redisDir;
let postgres;
function killAll() {
  killServers();
  postgres?.stop(true).catch(() => {});
  if (redis && redis.exitCode === null && redis.signalCode === null) {
    redis.stdout.destroy();
    process.kill(redis.pid, "SIGTERM");
    redis.unref();
  }
  if (redisDir) rmSync(redisDir, { recursive: true, force: true });
  if (sqliteDir) rmSync(sqliteDir, { recursive: true, force: true });
}
process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

async function freePort() {
  const probe = createNetServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

let redisUrl;
let inspector;
if (CASES.some((c) => c.redis)) {
  const port = await freePort();
  redisDir = mkdtempSync(join(tmpdir(), "flag-webhooks-bench-redis-"));
  redis = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", redisDir],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise((resolve, reject) => {
    let output = "";
    redis.on("error", (error) => reject(new Error(`cannot start redis-server: ${error.message}`)));
    redis.stdout.on("data", (chunk) => {
      output += chunk;
      if (output.includes("Ready to accept connections")) resolve();
    });
    redis.once("exit", (code) => reject(new Error(`redis-server exited with ${code}:\n${output}`)));
  });
  redisUrl = `redis://127.0.0.1:${port}`;
  const { Redis } = await import("ioredis");
  inspector = new Redis(redisUrl);
}

// ------------------------------------------------------------------------------ postgresql

let databaseUrl;
if (CASES.some((c) => c.postgres)) {
  // The tests' launcher (TypeScript, loaded through tsx): Debian's postgresql, run as the
  // postgres user under root, on a free loopback port, stopped by pid.
  const { tsImport } = await import("tsx/esm/api");
  const { startPostgres } = await tsImport("../test/support/postgres-server.ts", import.meta.url);
  postgres = await startPostgres().catch((error) => {
    // Without PostgreSQL the other cases still run; the Postgres ones are left out, said loudly.
    log(`options: *** the Postgres cases do not run: ${error.message} ***`);
    for (let i = CASES.length - 1; i >= 0; i--) if (CASES[i].postgres) CASES.splice(i, 1);
    return undefined;
  });
}
if (postgres) {
  databaseUrl = postgres.url;
  const { default: pg } = await import("pg");
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  const { PostgresInbox } = await import(distUrl("postgres.js"));
  await new PostgresInbox(admin, { scope: "bench" }).migrate();
  await admin.end();
}

// The SQLite cases' file: in a folder of its own, made here and removed at exit.
let sqliteDir;
if (CASES.some((c) => c.id.startsWith("sqlite"))) {
  sqliteDir = mkdtempSync(join(tmpdir(), "flag-webhooks-bench-sqlite-"));
}

/** Redis commands executed so far (INFO itself excluded), from INFO commandstats. */
async function redisCommands() {
  if (!inspector) return 0;
  const info = await inspector.info("commandstats");
  let calls = 0;
  for (const [, name, n] of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (name !== "info") calls += Number(n);
  return calls;
}

// ------------------------------------------------------------------------- child processes

/** The child's CPU time (user + system, µs) and the events its handler ran. */
function serverStats(child) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not report its stats")), 5000);
    const onMessage = (message) => {
      if (message?.stats) {
        clearTimeout(timer);
        child.off("message", onMessage);
        const { cpu, handled, verified, statements } = message.stats;
        resolve({ cpu: cpu.user + cpu.system, handled, verified, statements });
      }
    };
    child.on("message", onMessage);
    child.send("stats");
  });
}

function probe(port, duplicate) {
  const { body, headers } = signedRequest(duplicate);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path: PATH, method: "POST", headers: { ...headers, "content-length": body.length } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Lets the requests still in flight when a load stopped be answered, so counts line up: 600 ms,
 * so that a SQLite inbox's queue (10 deliveries waiting their turn behind 20 ms handlers) drains.
 */
const settle = () => new Promise((resolve) => setTimeout(resolve, 600));

function load(port, duration, duplicate) {
  return new Promise((resolve, reject) => {
    let responses = 0;
    const instance = autocannon(
      {
        url: `http://127.0.0.1:${port}${PATH}`,
        connections: CONNECTIONS,
        duration,
        timeout: 10,
        // A new body and signature for every request (the same id in a duplicate case).
        requests: [{ method: "POST", path: PATH, setupRequest: () => signedRequest(duplicate) }],
      },
      (error, result) => (error ? reject(error) : resolve({ result, responses })),
    );
    instance.on("response", () => responses++);
  });
}

// -------------------------------------------------------------------------------------- run

log(`options: ${machine()}`);
log(
  `options: library ${distDir()}; ${BODY_SIZE} B bodies, ${CONNECTIONS} connections, ${WARMUP} s warm-up + ` +
    `${DURATION} s per run, ${ROUNDS} rounds${QUICK ? " (BENCH_QUICK)" : ""}`,
);

const runs = Object.fromEntries(CASES.map((c) => [c.id, []]));
let failures = 0;
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? CASES : [...CASES].reverse();
  for (const c of order) {
    run++;
    const { child, port } = await startServer("options-servers.mjs", c.id, {
      BENCH_REDIS_URL: redisUrl ?? "",
      BENCH_DATABASE_URL: databaseUrl ?? "",
      BENCH_SQLITE_FILE: sqliteDir ? join(sqliteDir, `${c.id}-${run}.db`) : "",
    });
    try {
      const first = await probe(port, c.duplicate);
      if (first !== 204) throw new Error(`${c.id}: expected 204 before timing, got ${first}`);
      if (WARMUP > 0) await load(port, WARMUP, c.duplicate);
      await settle();
      const before = await serverStats(child);
      const commandsBefore = await redisCommands();
      const { result: r, responses } = await load(port, DURATION, c.duplicate);
      // The requests in flight when the load stopped are still handled: let them finish, then
      // count per delivery the server verified (a few more than the responses autocannon kept).
      await settle();
      const after = await serverStats(child);
      // Round trips: Redis commands, or the statements the receiver's pg clients sent.
      const commands = c.postgres ? after.statements - before.statements : (await redisCommands()) - commandsBefore;
      const handled = after.handled - before.handled;
      const verified = after.verified - before.verified;
      // Every answer is 204; the handler ran for each one (new ids) or for none (duplicates).
      const expectedHandled = c.duplicate ? 0 : verified;
      const bad = r.non2xx + r.errors + r.timeouts + (handled === expectedHandled ? 0 : 1);
      failures += bad;
      const result = {
        rps: responses / r.duration,
        cpuPerReq: (after.cpu - before.cpu) / verified,
        roundTrips: commands / verified,
        responses,
        bad,
      };
      runs[c.id].push(result);
      log(
        `options: round ${round + 1} ${c.id.padEnd(17)} ${fmt(result.rps, 0).padStart(7)} req/s  server CPU ` +
          `${fmt(result.cpuPerReq, 1)} µs/req  round trips/delivery ${fmt(result.roundTrips, 3)}  handled ${handled}/${verified} verified  ` +
          `non-2xx ${r.non2xx}  errors ${r.errors + r.timeouts}`,
      );
    } finally {
      await stopServer(child);
    }
  }
}
inspector?.disconnect();

// ----------------------------------------------------------------------- in-process deltas
// Over loopback HTTP the noise of a shared machine is far larger than a few percent, so the
// options are also timed without the network: flag-webhooks/fetch's webhookHandler called in
// this process with a new Request per delivery (bodies and signatures made outside the timing),
// in interleaved batches. The difference to the baseline is the option's own cost per delivery.

const IN_PROCESS = [
  { id: "baseline", name: "no option (baseline)", options: () => ({}) },
  { id: "max-age", name: '`maxAge: "1h"`', options: () => ({ maxAge: "1h" }) },
  {
    id: "memory",
    name: "`dedupe` on a full `MemoryDedupeStore`, new id each request",
    options: (m) => memoryDedupe(m),
  },
  {
    id: "memory-duplicate",
    name: "`dedupe` on a full `MemoryDedupeStore`, the same id each request",
    duplicate: true,
    options: (m) => memoryDedupe(m),
  },
  {
    id: "otel-api",
    name: "`telemetry: openTelemetry()`, `@opentelemetry/api` without an SDK",
    options: (_m, otel) => ({ telemetry: otel.openTelemetry() }),
  },
  {
    id: "otel-sdk",
    name: "`telemetry: openTelemetry()` with the SDK (batch span processor, metric reader), not registered globally",
    options: (_m, otel, sdk) => ({ telemetry: otel.openTelemetry(sdk.otelSdk()) }),
  },
];
// Full (maxKeys ids), as after running a while: every new id evicts the oldest.
function memoryDedupe({ MemoryDedupeStore }) {
  const store = new MemoryDedupeStore({ maxKeys: 10_000 });
  for (let i = 0; i < 10_000; i++) store.complete(`prefill_${i}`, 3_600_000);
  return { dedupe: { store, ttl: "1h" } };
}
// Small batches, many rounds, cases interleaved: the machine's noise falls on every case alike.
const BATCH = 250;
const IN_ROUNDS = QUICK ? 5 : 81;

async function inProcess() {
  const { webhookHandler } = await import(distUrl("fetch.js"));
  const library = await import(distUrl("index.js"));
  const otel = await import(distUrl("otel.js"));
  const sdk = await import("./otel-sdk.mjs");
  const handlers = IN_PROCESS.map((c) => {
    let handled = 0;
    const handler = webhookHandler({
      secret: SECRET,
      ...c.options(library, otel, sdk),
      onEvent() {
        handled++;
      },
    });
    return { ...c, handler, handled: () => handled, ns: [] };
  });
  async function batch(c) {
    const deliveries = Array.from({ length: BATCH }, () => signedRequest(c.duplicate));
    const before = c.handled();
    // CPU time, not wall time: on a shared machine, waiting for a core is not the option's cost.
    const started = process.cpuUsage();
    for (const { body, headers } of deliveries) {
      const response = await c.handler(new Request("http://127.0.0.1/webhooks", { method: "POST", headers, body }));
      if (response.status !== 204) throw new Error(`${c.id}: answered ${response.status}`);
    }
    const used = process.cpuUsage(started);
    const ns = ((used.user + used.system) * 1000) / BATCH;
    const ran = c.handled() - before;
    // A duplicate case's id is new in its first (warm-up) batch only.
    const expected = c.duplicate ? (c.ns.length === 0 && !c.warm ? 1 : 0) : BATCH;
    c.warm = true;
    if (ran !== expected) throw new Error(`${c.id}: the handler ran ${ran} times in ${BATCH}`);
    return ns;
  }
  for (const c of handlers) await batch(c); // warm-up
  for (let round = 0; round < IN_ROUNDS; round++) {
    const order = round % 2 === 0 ? handlers : [...handlers].reverse();
    for (const c of order) c.ns.push(await batch(c));
  }
  return handlers;
}

run++;
const core = await inProcess();
const coreBase = median(core[0].ns);
for (const c of core) log(`options: in-process ${c.id.padEnd(17)} ${fmt(median(c.ns) / 1000, 2)} µs/delivery`);
const httpCpu = median(runs.baseline.map((r) => r.cpuPerReq));
const coreRows = core.map((c) => {
  const ns = median(c.ns);
  const added = (ns - coreBase) / 1000;
  return [
    c.name,
    fmt(ns / 1000, 2),
    c.id === "baseline" ? "" : `${added >= 0 ? "+" : ""}${fmt(added, 2)}`,
    fmtRatio(coreBase / ns),
    c.id === "baseline" ? "" : `${fmt((100 * added) / httpCpu, 1)}%`,
  ];
});

// The options' own work, in tight loops (stable even on a busy machine): what maxAge adds is
// parsing createdAt (Date.parse) and two comparisons; what memory dedupe adds is a claim and a
// completion on the store (full, so each new id evicts the oldest), or one claim for a duplicate.
function ownWork({ MemoryDedupeStore }, { openTelemetry }) {
  const N = QUICK ? 50_000 : 500_000;
  const loop = (fn) => {
    fn(N / 10); // warm-up
    const times = [];
    for (let r = 0; r < 7; r++) {
      const started = process.cpuUsage();
      fn(N);
      const used = process.cpuUsage(started);
      times.push(((used.user + used.system) * 1000) / N);
    }
    return median(times);
  };
  let sink = 0;
  const parse = loop((n) => {
    for (let i = 0; i < n; i++) sink += Date.parse(createdAt) < i ? 1 : 0;
  });
  const store = memoryDedupe({ MemoryDedupeStore }).dedupe.store;
  let serialId = 0;
  // The cost of making an id string alone, taken out of the new-id figure.
  const fresh = loop((n) => {
    for (let i = 0; i < n; i++) sink += `evt_${String(serialId++).padStart(18, "0")}`.length;
  });
  const newId = loop((n) => {
    for (let i = 0; i < n; i++) {
      const id = `evt_${String(serialId++).padStart(18, "0")}`;
      if (store.claim(id, 60_000) === "claimed") store.complete(id, 3_600_000);
    }
  });
  store.complete("evt_duplicate", 3_600_000);
  const duplicate = loop((n) => {
    for (let i = 0; i < n; i++) sink += store.claim("evt_duplicate", 60_000) === "done" ? 1 : 0;
  });
  // What the receiver asks of openTelemetry() per delivery when no SDK is registered.
  const telemetry = openTelemetry();
  const noSdk = loop((n) => {
    for (let i = 0; i < n; i++) sink += telemetry.delivery() === undefined ? 1 : 0;
  });
  if (sink === 0) throw new Error("the loops did nothing");
  return [
    ["`maxAge`: `Date.parse(createdAt)` and the window check", parse],
    ["`MemoryDedupeStore` (full): claim + complete of a new id", Math.max(0, newId - fresh)],
    ["`MemoryDedupeStore` (full): claim of a done id (duplicate)", duplicate],
    ["`openTelemetry().delivery()` with no SDK registered (it answers `undefined`)", noSdk],
  ];
}
const own = ownWork(await import(distUrl("index.js")), await import(distUrl("otel.js")));
const ownRows = own.map(([name, ns]) => {
  const share = ns / 1000 / httpCpu;
  return [name, fmt(ns, 0), `${fmt(100 * share, 2)}%`];
});

// ------------------------------------------------------------------------------------ report

const stat = (id, key) => runs[id].map((r) => r[key]);
const med = (id, key) => median(stat(id, key));
const rows = CASES.map((c) => {
  const rps = med(c.id, "rps") / med("baseline", "rps");
  // Per-round ratios, each against the baseline of the same round.
  const perRound = runs[c.id].map((r, i) => r.rps / runs.baseline[i].rps);
  const { min, max } = spread(perRound);
  const cpu = med("baseline", "cpuPerReq") / med(c.id, "cpuPerReq");
  const trips = med(c.id, "roundTrips");
  let target = "";
  if (c.target) target = `≥ ${c.target}: ${rps >= c.target ? "met" : "**not met**"}`;
  const roundTrips = c.redis ?? c.postgres;
  if (roundTrips) target = `≤ ${roundTrips} round trips: ${trips <= roundTrips ? "met" : "**not met**"}`;
  if (c.against && runs[c.against]?.length) {
    // Each round's same-id rate over that round's new-id rate, the median of those.
    const ratio = median(runs[c.id].map((r, i) => r.rps / runs[c.against][i].rps));
    const met = ratio >= 1 ? "met" : "**not met**";
    target = `${target ? `${target}; ` : ""}≥ 1× \`${c.against}\` (same round): ${fmtRatio(ratio)}, ${met}`;
  }
  return [
    c.name,
    fmt(med(c.id, "rps"), 0),
    fmtRatio(rps),
    c.id === "baseline" ? "" : `${fmtRatio(min)}–${fmtRatio(max)}`,
    fmt(med(c.id, "cpuPerReq"), 1),
    fmtRatio(cpu),
    c.redis || c.postgres ? fmt(trips, 3) : "",
    target,
  ];
});

const markdown = [
  "## Options benchmark: the cost of maxAge and dedupe on the HTTP path",
  "",
  `${machine()}. \`flag-webhooks/express\` middleware with \`onEvent\` on a plain node:http server, one option ` +
    `added per case, each case in a fresh child process; autocannon in the parent, 127.0.0.1 only, ${CONNECTIONS} ` +
    `keep-alive connections, ${WARMUP} s discarded warm-up then ${DURATION} s measured, ${ROUNDS} rounds, cases ` +
    `interleaved (alternate rounds reversed). Every request is a ${BODY_SIZE}-byte \`flag.updated\` event with a new id ` +
    "(signed per request), except in the duplicate cases, which send one id over and over (204 with " +
    "`webhook-duplicate: true`). Redis: a local redis-server on loopback; round trips are Redis commands executed " +
    "(INFO commandstats) per delivery the receiver verified; Postgres: a local PostgreSQL, round trips are the statements " +
    "the receiver's pg clients sent (the inbox's own; its handler writes nothing) (counted with `onVerified`, in every case). The ratios are of medians over rounds; the spread is the min–max of each " +
    "round's ratio to that round's baseline. Server CPU ratio = baseline CPU µs/req ÷ the case's (lower CPU per " +
    "request scores above 1, comparable to a req/s ratio, and far less sensitive to other load).",
  "",
  table(
    [
      "receiver",
      "req/s",
      "req/s ÷ baseline",
      "per-round spread",
      "server CPU µs/req",
      "baseline CPU ÷ case CPU",
      "store round trips / delivery",
      "target",
    ],
    rows,
    ["l", "r", "r", "r", "r", "r", "r", "l"],
  ),
  "",
  `Failed or unexpected answers during the measured runs: ${failures} (every answer 204; the handler ran once per ` +
    "response with new ids and never in the duplicate cases, counted in the receiver).",
  "",
  `In process, without the network: \`flag-webhooks/fetch\` \`webhookHandler\` awaited once per delivery, a new ` +
    `\`Request\` each time (bodies and signatures made before timing), ${IN_ROUNDS} interleaved rounds of ${BATCH} ` +
    "deliveries per case, median CPU µs (user + system) per delivery. The added cost is the option's own; the last column puts it " +
    `against the ${fmt(httpCpu, 1)} µs of server CPU per request of the HTTP baseline above (the share of req/s ` +
    "the option can cost a receiver bound by its CPU).",
  "",
  table(
    ["receiver", "µs / delivery", "added µs", "deliveries/s ÷ baseline", "added ÷ HTTP baseline CPU/req"],
    coreRows,
    ["l", "r", "r", "r", "r"],
  ),
  "",
  "The options' own work in tight loops (median of 7 timed loops, CPU ns per operation; the new-id figure has the " +
    "cost of making the id string taken out), against the same HTTP baseline CPU per request:",
  "",
  table(["work an option adds per delivery", "ns", "÷ HTTP baseline CPU/req"], ownRows, ["l", "r", "r"]),
].join("\n");

process.stdout.write(`\n${markdown}\n`);
if (process.env.BENCH_RESULTS_FILE) appendFileSync(process.env.BENCH_RESULTS_FILE, `${markdown}\n\n`);
// The redis-server child would keep this process alive: stop it (by pid) now.
if (postgres) {
  const { tsImport } = await import("tsx/esm/api");
  const { stopPostgres } = await tsImport("../test/support/postgres-server.ts", import.meta.url);
  await stopPostgres(postgres);
  postgres = undefined;
}
killAll();
if (failures > 0) {
  log("options: some requests failed or were handled the wrong number of times: the figures above are not valid");
  process.exitCode = 1;
}
