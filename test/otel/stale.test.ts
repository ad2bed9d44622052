import { createServer, type Server } from "node:http";
import Database from "better-sqlite3";
import express from "express";
import { MemoryOrderStore, type OrderStore, RedisOrderStore, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { openTelemetry } from "flag-webhooks/otel";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signedHeaders } from "../support/deliveries.js";
import { close, listen, send } from "../support/http.js";
import { type Sdk, startSdk } from "../support/otel.js";
import { type TestDatabase, testDatabase } from "../support/postgres-database.js";
import { postgresAvailability } from "../support/postgres-server.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";
import { databaseFile } from "../support/sqlite.js";

// An event all of whose changes are stale (an older change of a field after a newer one was
// applied) is recorded as "stale" by the real OpenTelemetry SDK (in-memory exporters), on every
// path that orders: Express's route after the middleware and onEvent with an order store (memory,
// Redis), and the Postgres and SQLite inboxes' handle() given as onEvent, on real servers.

const SECRET = "whsec-otel-stale-test";
const postgres = postgresAvailability();
const redis = redisAvailability();

let sdk: Sdk;
let database: TestDatabase | undefined;
let pool: pg.Pool | undefined;
let redisServer: RedisServer | undefined;
let client: Redis | undefined;
const sqlite = new Database(databaseFile());
beforeAll(async () => {
  sdk = startSdk();
  if (postgres.available) {
    database = await testDatabase();
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
  }
  if (redis.available) {
    redisServer = await startRedis();
    client = new Redis(redisServer.url);
  }
}, 60_000);
afterAll(async () => {
  await sdk.shutdown();
  await pool?.end();
  await database?.close();
  await client?.quit();
  await stopRedis(redisServer);
  sqlite.close();
});

type App = (app: express.Express, telemetry: ReturnType<typeof openTelemetry>) => Promise<void>;

const ordered =
  (store: () => OrderStore): App =>
  async (app, telemetry) => {
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, order: { store: store() } }), (_req, res) => {
      res.sendStatus(204);
    });
  };

const paths: { name: string; skip?: string; app: App }[] = [
  { name: "Express route after the middleware, MemoryOrderStore", app: ordered(() => new MemoryOrderStore()) },
  {
    name: "Express onEvent, MemoryOrderStore",
    app: async (app, telemetry) => {
      const order = { store: new MemoryOrderStore() };
      app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, order, onEvent: () => {} }));
    },
  },
  {
    name: "Express route after the middleware, RedisOrderStore",
    ...(redis.available ? {} : { skip: redis.reason }),
    app: ordered(() => new RedisOrderStore(client as Redis, { scope: "otel-stale" })),
  },
  {
    name: "PostgresInbox handle() as onEvent",
    ...(postgres.available ? {} : { skip: postgres.reason }),
    app: async (app, telemetry) => {
      const inbox = new PostgresInbox(pool as pg.Pool, { scope: "otel-stale", order: true });
      await inbox.migrate();
      app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, onEvent: inbox.handle(() => {}) }));
    },
  },
  {
    name: "SqliteInbox handle() as onEvent",
    app: async (app, telemetry) => {
      const inbox = new SqliteInbox(sqlite, { scope: "otel-stale", order: true });
      await inbox.migrate();
      app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, onEvent: inbox.handle(() => {}) }));
    },
  },
];

/** A delivery of a change of `checkout`'s rollout, made at `createdAt`. */
async function rollout(server: Server, id: string, createdAt: string) {
  const event: WebhookEvent = createEvent("flag.updated", {
    id,
    createdAt,
    data: { flag: "checkout", changes: [{ path: "rollout.percent", from: null, to: 10 }] },
  });
  const body = Buffer.from(JSON.stringify(event));
  return send(server, { name: id, body, headers: await signedHeaders(SECRET, body), status: 204 });
}

describe("telemetry of a stale event", () => {
  for (const path of paths) {
    it.skipIf(path.skip !== undefined)(
      `${path.name}: the span's outcome and the deliveries metric say stale`,
      async () => {
        const app = express();
        await path.app(app, openTelemetry({ tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider }));
        const server = await listen(createServer(app));
        try {
          const newer = await rollout(server, `evt_new_${path.name}`, "2026-11-21T09:02:00Z");
          expect(newer.status).toBe(204);
          await sdk.ended("flag-webhooks.receive");
          sdk.spans.reset();
          await sdk.points();
          const older = await rollout(server, `evt_old_${path.name}`, "2026-11-21T09:01:00Z");
          expect([older.status, older.headers["webhook-stale"]]).toEqual([204, "true"]);
          const [receive] = await sdk.ended("flag-webhooks.receive");
          expect(receive?.attributes["flag_webhooks.outcome"]).toBe("stale");
          const points = await sdk.points();
          expect(points.get("flag_webhooks.deliveries")?.map((p) => [p.attributes, p.value])).toEqual([
            [{ "flag_webhooks.outcome": "stale", "flag_webhooks.event.type": "flag.updated" }, 1],
          ]);
        } finally {
          await close(server);
        }
      },
    );
  }
});
