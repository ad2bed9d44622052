import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import Database from "better-sqlite3";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCases, type DeliveryCase, LIMIT, SECRET } from "../support/cases.js";
import { eventJson, signedHeaders } from "../support/deliveries.js";
import { send, serverPerTest } from "../support/http.js";
import { recordingStore } from "../support/receiver.js";
import { databaseFile } from "../support/sqlite.js";

// Hostile input at a receiver with dedupe and an inbox on: every delivery the case table refuses
// (forged, unsigned, malformed, oversized, wrong method, signatures in odd encodings) is refused
// before any store is asked, so none can hold an id against the real delivery; requests that try
// to smuggle a second request past the body are refused by Node's parser; and signed ids built to
// meet in a store (NUL, "#" and a hash, long ids, look-alikes) are each handled once, on their own.

const cases = await buildCases();
const refused = cases.filter((c) => c.status >= 400);
const serve = serverPerTest();

let db: Database.Database;
let inbox: SqliteInbox<Database.Database>;
beforeAll(async () => {
  db = new Database(databaseFile());
  db.exec("create table effects (event_id text not null)");
  inbox = new SqliteInbox(db, { scope: "hostile" });
  await inbox.migrate();
});
afterAll(() => db?.close());

/** Express with dedupe on a store that writes down each call, and a route after the middleware. */
async function dedupeApp(): Promise<{ server: Server; calls: string[] }> {
  const store = recordingStore();
  const app = express();
  app.all("/webhooks", webhookMiddleware({ secret: SECRET, limit: LIMIT, dedupe: { store, ttl: 60_000 } }), (_r, res) =>
    res.sendStatus(204),
  );
  return { server: await serve(createServer(app)), calls: store.calls };
}

/** Express whose onEvent is the SQLite inbox's handle(), writing one effect row per event. */
async function inboxApp(): Promise<Server> {
  const app = express();
  app.all(
    "/webhooks",
    webhookMiddleware({
      secret: SECRET,
      limit: LIMIT,
      onError: () => {},
      onEvent: inbox.handle((event, tx) => {
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
      }),
    }),
  );
  return serve(createServer(app));
}

const rows = () => (db.prepare("select count(*) as n from flag_webhooks_inbox").get() as { n: number }).n;

describe("hostile input with dedupe and an inbox on", () => {
  it.each(refused.map((c) => [c.name, c] as [string, DeliveryCase]))(
    "%s: refused before any store is asked",
    async (_name, c) => {
      const { server, calls } = await dedupeApp();
      expect((await send(server, c)).status).toBe(c.status);
      expect(calls).toEqual([]);
      const before = rows();
      expect((await send(await inboxApp(), c)).status).toBe(c.status);
      expect(rows()).toBe(before);
    },
  );

  it("a HEAD of a signed delivery: 405 with Allow: POST and no body, and no store asked (a held answer never applies)", async () => {
    const { server, calls } = await dedupeApp();
    const body = eventJson("evt_head");
    const answer = await send(server, {
      name: "HEAD",
      method: "HEAD",
      headers: await signedHeaders(SECRET, body),
      body: Buffer.alloc(0),
      status: 405,
    });
    expect([answer.status, answer.headers.allow, answer.json]).toEqual([405, "POST", undefined]);
    expect(calls).toEqual([]);
  });

  it("a request smuggled behind the body (Content-Length and Transfer-Encoding both, or two lengths) is refused by Node, never handled", async () => {
    const { server, calls } = await dedupeApp();
    const body = eventJson("evt_smuggled");
    const signature = (await signedHeaders(SECRET, body))["service-signature"];
    const { port } = server.address() as { port: number };
    for (const framing of [
      `content-length: ${Buffer.byteLength(body)}\r\ntransfer-encoding: chunked\r\n`,
      `content-length: ${Buffer.byteLength(body)}\r\ncontent-length: 5\r\n`,
    ]) {
      const answer = await new Promise<string>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        let received = "";
        socket.on("data", (chunk: Buffer) => {
          received += chunk.toString("latin1");
        });
        socket.on("error", () => {});
        socket.on("close", () => resolve(received));
        socket.write(
          `POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\nservice-signature: ${signature}\r\n${framing}\r\n${body}`,
        );
        setTimeout(() => socket.destroy(), 500);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    }
    expect(calls).toEqual([]);
  });

  it("signed ids built to meet in a store are each handled once, on their own", async () => {
    const long = "x".repeat(3000);
    const ids = [
      "evt_a",
      "evt_a\u0000",
      "evt_a\u0000b",
      long,
      `#${createHash("sha256").update(long).digest("hex")}`,
      "#",
      "",
      "caf\u00e9",
      "cafe\u0301",
      "EVT_A",
      "evt_a ",
    ];
    const server = await inboxApp();
    const { server: deduped, calls } = await dedupeApp();
    for (const round of [1, 2]) {
      for (const id of ids) {
        const body = eventJson(id);
        const c: DeliveryCase = {
          name: id,
          headers: await signedHeaders(SECRET, body),
          body: Buffer.from(body),
          status: 204,
        };
        const answer = await send(server, { ...c, body: Buffer.from(body) });
        const duplicate = await send(deduped, c);
        // The 3 KB id is over LIMIT as a body: refused alike both times, by size.
        if (Buffer.byteLength(body) > LIMIT) {
          expect([answer.status, duplicate.status]).toEqual([413, 413]);
          continue;
        }
        expect([id, answer.status, answer.headers["webhook-duplicate"]]).toEqual([
          id,
          204,
          round === 1 ? undefined : "true",
        ]);
        expect([id, duplicate.status, duplicate.headers["webhook-duplicate"]]).toEqual([
          id,
          204,
          round === 1 ? undefined : "true",
        ]);
      }
    }
    const effects = db.prepare("select event_id, count(*) as n from effects group by event_id").all() as {
      event_id: string;
      n: number;
    }[];
    const small = ids.filter((id) => Buffer.byteLength(eventJson(id)) <= LIMIT);
    expect(effects.map((row) => row.event_id).sort()).toEqual([...small].sort());
    expect(effects.every((row) => row.n === 1)).toBe(true);
    expect(calls.filter((call) => call.startsWith("claim"))).toHaveLength(small.length * 2);
  });

  it("signed ids with a lone surrogate are refused 400 invalid_payload, every copy, before any store", async () => {
    // The parser refuses them (docs/core.md#events): keys the stores do not own would merge them
    // (a BullMQ job id, an app's own table, where UTF-8 writes every lone surrogate as U+FFFD). So
    // an inbox never holds one from a delivery, and no dedupe store is asked.
    const ids = ["evt_\ud800", "evt_\udbff", "\udc00evt", "evt_\ude00\ud83d"];
    const server = await inboxApp();
    const { server: deduped, calls } = await dedupeApp();
    const rows = () => db.prepare("select count(*) as n from flag_webhooks_inbox").get() as { n: number };
    const before = rows().n;
    for (const id of [...ids, ...ids]) {
      const body = eventJson(id);
      expect(body).toContain(JSON.stringify(id).slice(1, -1));
      const c: DeliveryCase = {
        name: id,
        headers: await signedHeaders(SECRET, body),
        body: Buffer.from(body),
        status: 400,
      };
      const answers = [await send(server, c), await send(deduped, c)];
      expect(answers.map((answer) => [answer.status, answer.json?.error?.code])).toEqual([
        [400, "invalid_payload"],
        [400, "invalid_payload"],
      ]);
    }
    expect(rows().n).toBe(before);
    expect(calls).toEqual([]);
  });
});
