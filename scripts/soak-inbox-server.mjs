// One receiver of the inbox soak (scripts/soak-inbox.mjs): Express, a PostgresInbox on a pg Pool
// whose clients count their statements, and a handler that inserts one row per run into
// soak_effects (no unique key: only the inbox keeps a second row out). Two of these run at once.
// With SOAK_SQLITE_FILE, a SqliteInbox on a better-sqlite3 connection to that file instead, which
// keeps ids for SOAK_RETENTION and, with SOAK_PRUNE=1, prunes every 2 s.
import express from "express";
import pg from "pg";
import { webhookMiddleware } from "../dist/express.js";
import { PostgresInbox } from "../dist/postgres.js";

const { SOAK_SECRET, SOAK_DATABASE_URL, SOAK_POOL } = process.env;

let statements = 0;
class CountingClient extends pg.Client {
  query(...args) {
    statements++;
    return super.query(...args);
  }
}
const { SOAK_SQLITE_FILE, SOAK_RETENTION, SOAK_PRUNE } = process.env;
const pool = new pg.Pool({
  connectionString: SOAK_DATABASE_URL,
  max: Number(SOAK_POOL ?? 25),
  connectionTimeoutMillis: 5000,
  Client: CountingClient,
});
const poolErrors = [];
pool.on("error", (error) => poolErrors.length < 5 && poolErrors.push(String(error)));
let inbox;
let sqlite;
let pruned = 0;
let pruning;
let lastPrune = Promise.resolve();
if (SOAK_SQLITE_FILE) {
  const { default: Database } = await import("better-sqlite3");
  const { SqliteInbox } = await import("../dist/sqlite.js");
  sqlite = new Database(SOAK_SQLITE_FILE);
  inbox = new SqliteInbox(sqlite, { scope: "soak", retention: Number(SOAK_RETENTION) });
  if (SOAK_PRUNE === "1") {
    pruning = setInterval(() => {
      lastPrune = inbox.prune().then(
        (n) => {
          pruned += n;
        },
        (error) => reported.length < 20 && reported.push(`prune: ${error}`),
      );
    }, 2000).unref();
  }
} else {
  inbox = new PostgresInbox(pool, { scope: "soak" });
}

const reported = [];
let runs = 0;
const app = express();
app.post(
  "/webhooks",
  webhookMiddleware({
    secret: SOAK_SECRET,
    limit: "64kb",
    onError: (error) => reported.length < 20 && reported.push(String(error)),
    onRejected: (error) =>
      error.status >= 500 && reported.length < 20 && reported.push(`${error.code}: ${error.message}`),
    onEvent: inbox.handle(async (event, tx) => {
      runs++;
      if (sqlite) tx.prepare("insert into soak_effects (event_id) values (?)").run(event.id);
      else await tx.query("insert into soak_effects (event_id) values ($1)", [event.id]);
    }),
  }),
);
const server = app.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
server.keepAliveTimeout = 30_000;

process.on("unhandledRejection", (reason) => {
  reported.push(`unhandled rejection: ${reason}`);
});
process.on("message", (message) => {
  if (message === "stats") {
    // What the receiver holds, not garbage it has yet to collect: measured after a full collection
    // (the process runs with --expose-gc).
    globalThis.gc?.();
    const memory = process.memoryUsage();
    process.send({
      rss: memory.rss,
      heap: memory.heapUsed,
      cpu: process.cpuUsage(),
      statements,
      runs,
      pruned,
      pool: { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount },
      reported,
      poolErrors,
    });
  } else if (message === "stop-prune") {
    clearInterval(pruning);
    lastPrune.finally(() => process.send({ stopped: true }));
  } else if (message === "gc") {
    globalThis.gc?.();
    process.send({ gc: true });
  } else if (message === "exit") {
    server.closeAllConnections();
    server.close(() => pool.end().then(() => process.exit(0)));
  }
});
process.on("disconnect", () => process.exit(0));
