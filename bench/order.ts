// The cost of `order` (docs/order.md), side by side in one run: the same fetch receiver and the
// same store with and without it, in µs of CPU per delivery (process.cpuUsage over many
// deliveries, after a warm-up), as a ratio to the same store without `order`, and the round trips
// per delivery the receiver's own client sent (Redis requests, Postgres statements; SQLite has
// none). The memory store; Redis (RedisDedupeStore, then with RedisOrderStore on the same ioredis
// client) on a redis-server started here; the SQLite inbox on better-sqlite3 over a WAL file; the
// Postgres inbox (pg Pool) on a PostgreSQL started here through the tests' launcher. Redis and
// Postgres cases are left out, said loudly, where their server is not installed.
//
//   nice -n 10 npx tsx bench/order.ts        # ~1 min
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import pg from "pg";
import { webhookHandler } from "../src/adapters/fetch.js";
import { MemoryOrderStore, RedisDedupeStore, RedisOrderStore } from "../src/index.js";
import { DynamoDBDedupeStore, DynamoDBOrderStore } from "../src/stores/dynamodb.js";
import { PostgresInbox } from "../src/stores/postgres/index.js";
import { SqliteInbox } from "../src/stores/sqlite/index.js";
import { createEvent, signedRequest } from "../src/testing/index.js";
import { countedClient, startDynalite, stopDynalite } from "../test/support/dynalite.js";
import { dynamodbLocalAvailability, startDynamoDBLocal, stopDynamoDBLocal } from "../test/support/dynamodb-local.js";
import { startPostgres, stopPostgres } from "../test/support/postgres-server.js";
import { startRedis, stopRedis } from "../test/support/redis-server.js";

const SECRET = "bench-order";
const N = Number(process.env.BENCH_ORDER_N ?? 4000);
const flags = Array.from({ length: 50 }, (_, i) => `flag-${i}`);

let serial = 0;
async function requests(count: number): Promise<Request[]> {
  const start = Date.parse("2026-11-21T09:00:00Z");
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      signedRequest({
        secret: SECRET,
        event: createEvent("flag.updated", {
          createdAt: new Date(start + serial++ * 1000).toISOString(),
          data: { flag: flags[i % flags.length], changes: [{ path: "rollout.percent", from: 0, to: i % 100 }] },
        }),
      }),
    ),
  );
}

/** µs of CPU per delivery and round trips per delivery (`trips()` counts them), deliveries sent one after another. */
async function measure(
  handle: (request: Request) => Promise<Response>,
  trips: () => number = () => 0,
  count = N,
): Promise<{ us: number; trips: number }> {
  for (const request of await requests(Math.min(500, count))) await handle(request);
  const batch = await requests(count);
  const tripsBefore = trips();
  const before = process.cpuUsage();
  for (const request of batch) {
    const response = await handle(request);
    if (response.status !== 204) throw new Error(`answered ${response.status}`);
  }
  const used = process.cpuUsage(before);
  return { us: (used.user + used.system) / count, trips: (trips() - tripsBefore) / count };
}

function sqlite(order: boolean) {
  const db = new Database(join(mkdtempSync(join(tmpdir(), "order-bench-")), "inbox.db"));
  db.pragma("journal_mode = wal");
  db.pragma("synchronous = normal");
  return { db, inbox: new SqliteInbox(db, { scope: "bench", order }) };
}

const rows: string[] = [];
function pair(
  name: string,
  plain: { us: number; trips: number },
  ordered: { us: number; trips: number },
  tripsShown: boolean,
) {
  const trips = (m: { trips: number }) => (tripsShown ? m.trips.toFixed(2) : "0");
  rows.push(`| ${name}, no order | ${plain.us.toFixed(1)} | 1.00 | ${trips(plain)} |`);
  rows.push(
    `| ${name}, order | ${ordered.us.toFixed(1)} | ${(ordered.us / plain.us).toFixed(2)} | ${trips(ordered)} |`,
  );
}

pair(
  "fetch receiver, MemoryOrderStore",
  await measure(webhookHandler({ secret: SECRET, onEvent: () => {} })),
  await measure(webhookHandler({ secret: SECRET, order: { store: new MemoryOrderStore() }, onEvent: () => {} })),
  false,
);

const sqliteRuns: { us: number; trips: number }[] = [];
for (const order of [false, true]) {
  const { inbox, db } = sqlite(order);
  await inbox.migrate();
  sqliteRuns.push(await measure(webhookHandler({ secret: SECRET, onEvent: inbox.handle(() => {}) })));
  db.close();
}
pair("SQLite inbox (better-sqlite3, WAL)", sqliteRuns[0] as never, sqliteRuns[1] as never, false);

// A flag 20,000 of whose paths were changed long ago (81 days before the deliveries, past the
// SQLite inbox's 30 d and the memory store's 24 h retentions), then new changes of one path: the
// record each delivery reads and writes.
async function seedOldPaths(handle: (request: Request) => Promise<Response>): Promise<void> {
  for (let batch = 0; batch < 10; batch++) {
    const changes = Array.from({ length: 2000 }, (_, i) => ({ path: `rules.${batch * 2000 + i}`, from: 0, to: 1 }));
    const event = createEvent("flag.updated", {
      createdAt: new Date(Date.parse("2026-09-01T09:00:00Z") + batch).toISOString(),
      data: { flag: flags[0], changes },
    });
    const response = await handle(await signedRequest({ secret: SECRET, event }));
    if (response.status !== 204) throw new Error(`seeding answered ${response.status}`);
  }
}
const oneFlag = flags.splice(1);
const oldPaths: { us: number; trips: number }[] = [];
{
  const handle = webhookHandler({ secret: SECRET, order: { store: new MemoryOrderStore() }, onEvent: () => {} });
  await seedOldPaths(handle);
  oldPaths.push(await measure(handle, () => 0, 300));
  const { inbox, db } = sqlite(true);
  await inbox.migrate();
  const inSqlite = webhookHandler({ secret: SECRET, onEvent: inbox.handle(() => {}) });
  await seedOldPaths(inSqlite);
  oldPaths.push(await measure(inSqlite, () => 0, 300));
  db.close();
}
flags.push(...oneFlag);
rows.push(`| MemoryOrderStore, one flag with 20,000 old paths | ${oldPaths[0]?.us.toFixed(1)} | | 0 |`);
rows.push(`| SQLite inbox, order, one flag with 20,000 old paths | ${oldPaths[1]?.us.toFixed(1)} | | 0 |`);

// Redis: dedupe on RedisDedupeStore, then the same with RedisOrderStore on the same client.
const redis = await startRedis().catch((error: Error) => {
  console.error(`*** the Redis cases do not run: ${error.message} ***`);
  return undefined;
});
if (redis) {
  const client = new Redis(redis.url);
  let sent = 0;
  const wire = {
    call(command: string, ...args: string[]) {
      sent++;
      return client.call(command, ...args);
    },
  };
  const receiver = (scope: string, order: boolean) =>
    webhookHandler({
      secret: SECRET,
      dedupe: { store: new RedisDedupeStore(wire, { scope }), ttl: "1h" },
      ...(order && { order: { store: new RedisOrderStore(wire, { scope }) } }),
      onEvent: () => {},
    });
  const count = Math.min(N, 2000);
  pair(
    "Redis (ioredis), dedupe on RedisDedupeStore",
    await measure(receiver("plain", false), () => sent, count),
    await measure(receiver("ordered", true), () => sent, count),
    true,
  );
  await client.quit();
  await stopRedis(redis);
}

// DynamoDB: dedupe on DynamoDBDedupeStore, then the same with DynamoDBOrderStore on the same
// client and table, against dynalite (served from a thread of this process, so its CPU is in the
// figures: read the requests, not the µs). Requests counted by a middleware on the SDK's stack.
{
  const dynalite = await startDynalite();
  const { client, sent } = countedClient(dynalite);
  const receiver = (scope: string, order: boolean) =>
    webhookHandler({
      secret: SECRET,
      dedupe: { store: new DynamoDBDedupeStore(client, { table: dynalite.table, scope }), ttl: "1h" },
      ...(order && { order: { store: new DynamoDBOrderStore(client, { table: dynalite.table, scope }) } }),
      onEvent: () => {},
    });
  const count = Math.min(N, 1000);
  pair(
    "DynamoDB (dynalite), dedupe on DynamoDBDedupeStore",
    await measure(receiver("plain", false), sent, count),
    await measure(receiver("ordered", true), sent, count),
    true,
  );
  await stopDynalite(dynalite);
}

// The same on AWS's DynamoDB Local, which has TransactWriteItems: there the ordered delivery ends
// in one transaction (the done mark with the commit). It serves from a JVM apart, so the µs are
// this process's alone (the SDK's and the receiver's).
if (dynamodbLocalAvailability().available) {
  const local = await startDynamoDBLocal();
  const { client, sent } = countedClient(local);
  const receiver = (scope: string, order: boolean) =>
    webhookHandler({
      secret: SECRET,
      dedupe: { store: new DynamoDBDedupeStore(client, { table: local.table, scope }), ttl: "1h" },
      ...(order && { order: { store: new DynamoDBOrderStore(client, { table: local.table, scope }) } }),
      onEvent: () => {},
    });
  const count = Math.min(N, 1000);
  pair(
    "DynamoDB Local, dedupe on DynamoDBDedupeStore",
    await measure(receiver("plain", false), sent, count),
    await measure(receiver("ordered", true), sent, count),
    true,
  );
  await stopDynamoDBLocal(local);
}

// Postgres: the inbox's handle(), with and without order, on a pg Pool whose clients count statements.
const postgres = await startPostgres().catch((error: Error) => {
  console.error(`*** the Postgres cases do not run: ${error.message} ***`);
  return undefined;
});
if (postgres) {
  let statements = 0;
  class CountingClient extends pg.Client {
    // biome-ignore lint/suspicious/noExplicitAny: pg's query has many overloads; all are counted alike.
    override query(...args: any[]): any {
      statements++;
      return (super.query as (...a: unknown[]) => unknown)(...args);
    }
  }
  const pool = new pg.Pool({ connectionString: postgres.url, max: 4, Client: CountingClient });
  const runs: { us: number; trips: number }[] = [];
  for (const order of [false, true]) {
    const inbox = new PostgresInbox(pool, { scope: order ? "ordered" : "plain", order });
    await inbox.migrate();
    runs.push(
      await measure(
        webhookHandler({ secret: SECRET, onEvent: inbox.handle(() => {}) }),
        () => statements,
        Math.min(N, 2000),
      ),
    );
  }
  pair("Postgres inbox (pg Pool)", runs[0] as never, runs[1] as never, true);
  await pool.end();
  await stopPostgres(postgres);
}

console.log(
  `node ${process.version}, ${N} deliveries each (2,000 on Redis and Postgres, 1,000 on DynamoDB), one at a time\n`,
);
console.log("| receiver | µs CPU / delivery | ratio | round trips / delivery |\n| --- | --- | --- | --- |");
for (const row of rows) console.log(row);
