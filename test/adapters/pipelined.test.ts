import { createServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import Fastify from "fastify";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFile } from "../support/sqlite.js";

// Copies of one event pipelined on one keep-alive connection to Koa and Fastify: answers in order,
// the first's 2xx and a 409 for each copy sent while it runs (with a dedupe store), or a
// duplicate once it committed (the SQLite inbox alone); the handler runs once.

const SECRET = "whsec-attack-pipelined";
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function raw(event: WebhookEvent): Promise<string> {
  const d = await signedDelivery({ secret: SECRET, event });
  const head = Object.entries(d.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  return `POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${Buffer.byteLength(d.body)}\r\n${head}\r\n${d.body}`;
}

/** The statuses answered on one connection within `ms`, in order. */
function statuses(server: Server, bytes: string, ms: number): Promise<string[]> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
    });
    socket.on("error", () => {});
    socket.write(bytes);
    setTimeout(() => {
      socket.destroy();
      resolve([...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => match[1] as string));
    }, ms);
  });
}

type Handler = (event: WebhookEvent) => Promise<unknown>;
type Options = { dedupe?: { store: MemoryDedupeStore; ttl: string } };

const SERVERS: Record<string, (onEvent: Handler, options: Options) => Promise<Server>> = {
  async koa(onEvent, options) {
    const app = new Koa();
    app.use(koaMiddleware({ secret: SECRET, ...options, onEvent }));
    const server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(() => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    });
    return server;
  },
  async fastify(onEvent, options) {
    const app = Fastify();
    await app.register(webhookPlugin, { path: "/webhooks", secret: SECRET, ...options, onEvent });
    await app.listen({ port: 0, host: "127.0.0.1" });
    closers.push(() => app.close());
    return app.server;
  },
};

describe.each(Object.keys(SERVERS))("%s: three copies of one event pipelined on one connection", (name) => {
  const make = SERVERS[name] as (typeof SERVERS)["koa"];

  it("with MemoryDedupeStore: 204, 409, 409 in order; one run", async () => {
    let runs = 0;
    const server = await make(
      async () => {
        runs++;
        await sleep(150);
      },
      { dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } },
    );
    const one = await raw(createEvent("flag.updated", { id: `evt_${name}_pipelined_memory` }));
    expect(await statuses(server, one + one + one, 600)).toEqual(["204", "409", "409"]);
    expect(runs).toBe(1);
  });

  it("with the SQLite inbox alone: 204, then two duplicates (204) in order; one effect", async () => {
    const db = new Database(databaseFile());
    closers.push(() => db.close());
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
    const inbox = new SqliteInbox(db, { scope: `pipelined-${name}` });
    await inbox.migrate();
    const server = await make(
      inbox.handle(async (event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
        await sleep(150);
      }),
      {},
    );
    const one = await raw(createEvent("flag.updated", { id: `evt_${name}_pipelined_inbox` }));
    expect(await statuses(server, one + one + one, 900)).toEqual(["204", "204", "204"]);
    expect(db.prepare("select count(*) as n from effects").get()).toEqual({ n: 1 });
    expect(db.inTransaction).toBe(false);
  });
});
