// One receiver per process for bench/options.mjs: flag-webhooks/express on a plain node:http
// server with onEvent, and one option switched on (or none: the baseline). Started with
// child_process.fork as `node options-servers.mjs <case>`; Redis cases connect to
// BENCH_REDIS_URL, Postgres cases to BENCH_DATABASE_URL (and count their statements). Reports its port over IPC; answers "stats" with its CPU time, how many
// deliveries it verified and how many events its handler ran; exits when told to, when the parent goes away, or after a hard limit.
import { createServer } from "node:http";
import { distUrl, SECRET } from "./lib.mjs";

const LIMIT = 1024 * 1024;
const { webhookMiddleware } = await import(distUrl("express.js"));
const { MemoryDedupeStore, RedisDedupeStore } = await import(distUrl("index.js"));

async function ioredis() {
  // From the repository's dev dependencies (bench/ resolves up to ../node_modules).
  const { Redis } = await import("ioredis");
  const client = new Redis(process.env.BENCH_REDIS_URL, { lazyConnect: true });
  await client.connect();
  return client;
}
async function nodeRedis() {
  const { createClient } = await import("redis");
  const client = createClient({ url: process.env.BENCH_REDIS_URL });
  await client.connect();
  return client;
}

/** A pg Pool on BENCH_DATABASE_URL whose clients count their statements (one round trip each). */
let statements = 0;
async function pgPool() {
  const { default: pg } = await import("pg");
  class CountingClient extends pg.Client {
    query(...args) {
      statements++;
      return super.query(...args);
    }
  }
  const pool = new pg.Pool({ connectionString: process.env.BENCH_DATABASE_URL, max: 10, Client: CountingClient });
  pool.on("error", () => {});
  return pool;
}
async function postgresInbox(scope) {
  const { PostgresInbox } = await import(distUrl("postgres.js"));
  return new PostgresInbox(await pgPool(), { scope });
}

/** A SqliteInbox on a better-sqlite3 connection to BENCH_SQLITE_FILE, in WAL mode. */
async function sqliteInbox(scope) {
  const { default: Database } = await import("better-sqlite3");
  const { SqliteInbox } = await import(distUrl("sqlite.js"));
  const db = new Database(process.env.BENCH_SQLITE_FILE);
  db.pragma("journal_mode = wal");
  const inbox = new SqliteInbox(db, { scope });
  await inbox.migrate();
  return inbox;
}

const TTL = "1h";
/**
 * A MemoryDedupeStore as it is after running a while: full (maxKeys ids), so every new id evicts
 * the oldest, the steady state of a long-running receiver.
 */
function fullMemoryStore() {
  const store = new MemoryDedupeStore({ maxKeys: 10_000 });
  for (let i = 0; i < 10_000; i++) store.complete(`prefill_${i}`, 3_600_000);
  return store;
}
/** The option each case adds to the baseline receiver. */
const CASES = {
  baseline: async () => ({}),
  "max-age": async () => ({ maxAge: "1h" }),
  memory: async () => ({ dedupe: { store: fullMemoryStore(), ttl: TTL } }),
  "memory-duplicate": async () => ({ dedupe: { store: fullMemoryStore(), ttl: TTL } }),
  "redis-ioredis": async () => ({
    dedupe: { store: new RedisDedupeStore(await ioredis(), { scope: "bench" }), ttl: TTL },
  }),
  "redis-node-redis": async () => ({
    dedupe: { store: new RedisDedupeStore(await nodeRedis(), { scope: "bench" }), ttl: TTL },
  }),
  "redis-duplicate": async () => ({
    dedupe: { store: new RedisDedupeStore(await ioredis(), { scope: "bench" }), ttl: TTL },
  }),
  // The transactional inbox: onEvent runs inside the inbox's transaction (the handler writes nothing).
  "postgres-inbox": async () => ({ inbox: await postgresInbox(`bench-${process.pid}`) }),
  "postgres-duplicate": async () => ({ inbox: await postgresInbox(`bench-${process.pid}`) }),
  // A handler that awaits 20 ms, on each store.
  "memory-20ms": async () => ({ dedupe: { store: fullMemoryStore(), ttl: TTL }, handlerMs: 20 }),
  "postgres-inbox-20ms": async () => ({ inbox: await postgresInbox(`bench-${process.pid}`), handlerMs: 20 }),
  "sqlite-inbox": async () => ({ inbox: await sqliteInbox("bench") }),
  "sqlite-duplicate": async () => ({ inbox: await sqliteInbox("bench") }),
  "sqlite-inbox-20ms": async () => ({ inbox: await sqliteInbox("bench"), handlerMs: 20 }),
  // The inbox as a lease-based DedupeStore, as RedisDedupeStore.
  "postgres-store": async () => ({ dedupe: { store: await postgresInbox(`bench-${process.pid}`), ttl: TTL } }),
  // @opentelemetry/api installed, no SDK registered: the library instrumented, the app not.
  "otel-api": async () => ({ telemetry: (await import(distUrl("otel.js"))).openTelemetry() }),
  // The SDK registered globally (context manager, propagator, batch span processor, metric reader).
  "otel-sdk": async () => {
    (await import("./otel-sdk.mjs")).otelSdk({ register: true });
    return { telemetry: (await import(distUrl("otel.js"))).openTelemetry() };
  },
};

const name = process.argv[2];
if (!CASES[name]) {
  console.error(`usage: node options-servers.mjs <${Object.keys(CASES).join("|")}>`);
  process.exit(2);
}

let handled = 0;
// Every verified delivery makes its dedupe calls, even one whose connection the load generator
// closed when it stopped: the per-request figures divide by this count.
let verified = 0;
const { inbox, handlerMs = 0, ...option } = await CASES[name]();
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
function onEvent(event) {
  if (event.type !== "flag.updated") throw new Error("unexpected event");
  handled++;
  if (handlerMs > 0) return wait(handlerMs).then(() => undefined);
}
const middleware = webhookMiddleware({
  secret: SECRET,
  limit: LIMIT,
  ...option,
  onVerified() {
    verified++;
  },
  onEvent: inbox ? inbox.handle(onEvent) : onEvent,
  onError(error) {
    console.error(`options-servers ${name}:`, error);
  },
});
const server = createServer((req, res) => {
  middleware(req, res, () => {
    res.statusCode = 500; // never reached with onEvent
    res.end();
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, "127.0.0.1", () => process.send?.({ ready: true, port: server.address().port }));

const HARD_LIMIT_MS = Number(process.env.BENCH_SERVER_MAX_MS) || 10 * 60 * 1000;
setTimeout(() => process.exit(0), HARD_LIMIT_MS).unref();
process.on("message", (message) => {
  if (message === "stop") process.exit(0);
  if (message === "stats") process.send({ stats: { cpu: process.cpuUsage(), handled, verified, statements } });
});
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
