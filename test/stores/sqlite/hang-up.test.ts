import type { Server } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// The client hangs up while onEvent (an SQLite inbox's handler, with and without a dedupe store)
// still works: a retry meanwhile is 409 or waits its turn, never a second run; once the handler
// ends, its effect is committed exactly once and the inbox is free for the next delivery.

const SECRET = "whsec-attack-hang-up-inbox";
const closers: (() => Promise<unknown> | undefined)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function serve(server: Server): Promise<string> {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

async function attempt(url: string, d: { body: string; headers: Record<string, string> }, abortAfter?: number) {
  try {
    const response = await fetch(url, {
      method: "POST",
      body: d.body,
      headers: d.headers,
      signal: abortAfter === undefined ? undefined : AbortSignal.timeout(abortAfter),
    });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

type OnEvent = (event: WebhookEvent) => Promise<unknown>;
type Options = { dedupe?: { store: MemoryDedupeStore; ttl: string } };

const SERVERS: Record<string, (onEvent: OnEvent, options: Options) => Promise<Server>> = {
  async express(onEvent, options) {
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, onError: () => {}, ...options, onEvent }));
    return createServer(app);
  },
  async koa(onEvent, options) {
    const app = new Koa();
    app.use(koaMiddleware({ secret: SECRET, onError: () => {}, ...options, onEvent }));
    return createServer(app.callback());
  },
  async fastify(onEvent, options) {
    const app = Fastify();
    await app.register(webhookPlugin, { path: "/webhooks", secret: SECRET, onError: () => {}, ...options, onEvent });
    await app.listen({ port: 0, host: "127.0.0.1" });
    return app.server;
  },
};

describe.each(Object.keys(SERVERS))("%s: the client hangs up while the SQLite inbox's handler works", (name) => {
  it.each([
    ["without dedupe", false],
    ["with MemoryDedupeStore", true],
  ] as const)("%s: one run, committed once, the inbox free after", async (_label, withDedupe) => {
    const db = new Database(databaseFile());
    closers.push(() => void db.close());
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
    const inbox = new SqliteInbox(db, { scope: `hang-up-${name}`, timeout: "2s" });
    await inbox.migrate();
    let runs = 0;
    const handle = inbox.handle(async (event, tx) => {
      runs++;
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      await sleep(400);
    });
    const options: Options = withDedupe ? { dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } } : {};
    const url = await serve(await (SERVERS[name] as (typeof SERVERS)["express"])(handle, options));
    const event = createEvent("flag.updated");
    const d = await signedDelivery({ secret: SECRET, event });
    expect(await attempt(url, d, 100)).toBe(0);
    // A retry while the handler works: 409 with dedupe; without, it waits its turn and is a duplicate.
    const retry = await attempt(url, d);
    await sleep(500);
    const later = await attempt(url, d);
    const other = createEvent("flag.updated");
    const fresh = await attempt(url, await signedDelivery({ secret: SECRET, event: other }));
    await sleep(500);
    const rows = db.prepare("select event_id from effects order by rowid").all() as { event_id: string }[];
    expect({ retry, later, fresh, runs, rows: rows.map((row) => row.event_id), open: db.inTransaction }).toEqual({
      retry: withDedupe ? 409 : 204,
      later: 204,
      fresh: 204,
      runs: 2,
      rows: [event.id, other.id],
      open: false,
    });
  });
});
