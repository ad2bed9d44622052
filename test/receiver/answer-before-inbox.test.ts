import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import express from "express";
import Fastify from "fastify";
import type { WebhookEvent } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFile } from "../support/sqlite.js";

// An Express onEvent that answers 2xx on `res` first and then runs an inbox's handler: the inbox
// enlists after the answer left. Whatever it does then, the inbox must not stall (its transaction
// left open, holding the connection's turn), and the effect must be committed once, or not at all
// with a retry possible.

const SECRET = "whsec-attack-answer-first";
const servers: Server[] = [];
const dbs: Database.Database[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((server) => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    }),
  );
  for (const db of dbs.splice(0)) db.close();
});

async function serve(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

async function attempt(url: string, delivery: { body: string; headers: Record<string, string> }): Promise<number> {
  const response = await fetch(url, { method: "POST", body: delivery.body, headers: delivery.headers });
  await response.arrayBuffer();
  return response.status;
}

function database(): Database.Database {
  const db = new Database(databaseFile());
  db.pragma("journal_mode = wal");
  db.exec("create table effects (event_id text not null)");
  dbs.push(db);
  return db;
}

describe("Express onEvent that sends 200 on res before running the SQLite inbox's handler (no dedupe)", () => {
  it("the handler's effect is committed, and the next delivery is not stuck behind an open transaction", async () => {
    const db = database();
    const inbox = new SqliteInbox(db, { scope: "answer-first", timeout: "1s" });
    await inbox.migrate();
    const handle = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware<express.Request, express.Response>({
        secret: SECRET,
        onError: () => {},
        onEvent: async (event: WebhookEvent, _req, res) => {
          res.status(200).send("ok");
          await sleep(20);
          return handle(event);
        },
      }),
    );
    const url = await serve(createServer(app));
    const [one, two] = [createEvent("flag.updated"), createEvent("flag.updated")];
    const first = await signedDelivery({ secret: SECRET, event: one });
    const second = await signedDelivery({ secret: SECRET, event: two });
    expect(await attempt(url, first)).toBe(200);
    await sleep(200);
    expect(await attempt(url, second)).toBe(200);
    await sleep(200);
    const rows = db.prepare("select event_id from effects order by rowid").all() as { event_id: string }[];
    expect(rows.map((row) => row.event_id)).toEqual([one.id, two.id]);
    // Read on the inbox's own connection: the rows are committed, not seen inside a transaction left open.
    expect(db.inTransaction).toBe(false);
  });
});

describe("Fastify onEvent that sends 200 with reply.send() before running the SQLite inbox's handler (no dedupe)", () => {
  it("the handler's effect is committed, and the next delivery is not stuck behind an open transaction", async () => {
    const db = database();
    const inbox = new SqliteInbox(db, { scope: "answer-first-fastify", timeout: "1s" });
    await inbox.migrate();
    const handle = inbox.handle((event, tx) => {
      tx.prepare("insert into effects (event_id) values (?)").run(event.id);
    });
    const app = Fastify();
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      onError: () => {},
      onEvent: async (event, _request, reply) => {
        await reply.code(200).send("ok");
        await sleep(20);
        return handle(event);
      },
    });
    await app.ready();
    const url = await serve(app.server);
    const [one, two] = [createEvent("flag.updated"), createEvent("flag.updated")];
    expect(await attempt(url, await signedDelivery({ secret: SECRET, event: one }))).toBe(200);
    await sleep(200);
    expect(await attempt(url, await signedDelivery({ secret: SECRET, event: two }))).toBe(200);
    await sleep(200);
    const rows = db.prepare("select event_id from effects order by rowid").all() as { event_id: string }[];
    expect(rows.map((row) => row.event_id)).toEqual([one.id, two.id]);
    expect(db.inTransaction).toBe(false);
  });
});
