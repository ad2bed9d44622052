import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Many copies of one event at the same moment, through four adapters that share one inbox and
// one pg Pool, each answering its own way (a 2xx written on res, on ctx, returned, or nothing),
// under load: each event's writes through tx happen exactly once, every copy ends with a 2xx
// (the sender retrying 409 and 503), and no transaction is left open.

const availability = postgresAvailability();
const SECRET = "whsec-copies-at-once";
const EVENTS = 40;
const COPIES = 6;

let db: TestDatabase;
let pool: pg.Pool;
const servers: Server[] = [];
const urls: string[] = [];
let runs = 0;

beforeAll(async () => {
  if (!availability.available) return;
  db = await testDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 10 });
  // A short lockTimeout: copies that find the id in flight get 409 and retry, as well as wait.
  const inbox = new PostgresInbox(pool, { scope: "copies-at-once", lockTimeout: 50 });
  await inbox.migrate();
  await pool.query("create table effects (event_id text not null, via text not null)");
  const write = async (id: string, via: string, tx: pg.PoolClient) => {
    runs++;
    await tx.query("insert into effects (event_id, via) values ($1, $2)", [id, via]);
    await sleep(60);
  };

  const app = express();
  app.post(
    "/webhooks",
    expressMiddleware({
      secret: SECRET,
      onError: () => {},
      onEvent: inbox.handle(async (event, tx, _req, res: express.Response) => {
        await write(event.id, "express", tx);
        res.status(200).json({ ok: true });
      }),
    }),
  );
  const koa = new Koa();
  koa.use(
    koaMiddleware({
      secret: SECRET,
      onError: () => {},
      onEvent: inbox.handle(async (event, tx, ctx: Koa.Context) => {
        await write(event.id, "koa", tx);
        ctx.status = 202;
      }),
    }),
  );
  const fastify = Fastify();
  await fastify.register(webhookPlugin, {
    path: "/webhooks",
    secret: SECRET,
    onError: () => {},
    onEvent: inbox.handle(async (event, tx) => write(event.id, "fastify", tx)),
  });
  await fastify.ready();
  const fetchHandler = webhookHandler({
    secret: SECRET,
    onError: () => {},
    onEvent: inbox.handle(async (event, tx) => write(event.id, "fetch", tx)),
  });
  for (const server of [
    createServer(app),
    createServer(koa.callback()),
    fastify.server,
    createAdaptorServer({ fetch: fetchHandler }) as Server,
  ]) {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push(server);
    urls.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`);
  }
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections?.();
    await new Promise((resolve) => server.close(resolve));
  }
  await pool?.end();
  await db?.close();
});

/** Sends one copy until it gets a 2xx (retrying 409, 503 and broken connections), bounded. */
async function deliver(
  url: string,
  delivery: { body: string; headers: Record<string, string> },
  tally: Map<string, number>,
) {
  for (let attempt = 0; attempt < 200; attempt++) {
    let status: string;
    try {
      const response = await fetch(url, {
        method: "POST",
        body: delivery.body,
        headers: delivery.headers,
        signal: AbortSignal.timeout(15_000),
      });
      await response.arrayBuffer();
      status = String(response.status);
      if (response.headers.get("webhook-duplicate") === "true") status += " duplicate";
    } catch {
      status = "broken";
    }
    tally.set(status, (tally.get(status) ?? 0) + 1);
    if (/^2/.test(status)) return status;
    await sleep(20 + Math.random() * 30);
  }
  throw new Error("a copy never got a 2xx");
}

describe.skipIf(!availability.available)("PostgresInbox: copies of each event at once, through four adapters", () => {
  it(`${EVENTS} events × ${COPIES} copies at once: one effect each, every copy 2xx in the end, no transaction left open`, async () => {
    const tally = new Map<string, number>();
    const events = Array.from({ length: EVENTS }, () => createEvent("flag.updated"));
    const began = performance.now();
    await Promise.all(
      events.flatMap((event, e) =>
        Array.from({ length: COPIES }, async (_, copy) =>
          deliver(urls[(e + copy) % urls.length] as string, await signedDelivery({ secret: SECRET, event }), tally),
        ),
      ),
    );
    const seconds = (performance.now() - began) / 1000;
    const { rows } = await pool.query(
      "select event_id, count(*)::int as n from effects group by event_id having count(*) <> 1",
    );
    expect(rows).toEqual([]);
    expect(Number((await pool.query("select count(*) from effects")).rows[0].count)).toBe(EVENTS);
    expect(runs).toBeGreaterThanOrEqual(EVENTS);
    const open = await pool.query(
      "select count(*)::int as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'",
    );
    expect(open.rows[0].n).toBe(0);
    // Only 2xx, 409 and 503 were answered on the way, never a 500.
    for (const status of tally.keys()) expect(status).toMatch(/^(2\d\d( duplicate)?|409|503)$/);
    const via = await pool.query("select via, count(*)::int as n from effects group by via order by via");
    console.info(
      `copies at once: ${EVENTS * COPIES} copies, ${[...tally.values()].reduce((a, b) => a + b)} requests in ${seconds.toFixed(1)} s, ${runs} handler runs: ${JSON.stringify(Object.fromEntries(tally))}; handled by ${JSON.stringify(via.rows)}`,
    );
  });
});
