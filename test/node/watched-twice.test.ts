import { createServer } from "node:http";
import compression from "compression";
import express from "express";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { post, serverPerTest } from "../support/http.js";

// Every watched response shares the watch's methods, which find the watch the response carries
// (node/watched-methods.ts). A response watched twice, by two receivers on one route, must still
// answer once, through both watches in turn, and each receiver must record what it answered.

const SECRET = "watched-twice-secret";
const serve = serverPerTest();

describe("one response watched by two receivers", () => {
  it("a route behind two webhookMiddleware with dedupe: one answer, and both stores mark the event handled", async () => {
    const outer = new MemoryDedupeStore();
    const inner = new MemoryDedupeStore();
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      express.raw({ type: "*/*" }),
      webhookMiddleware({ secret: SECRET, dedupe: { store: outer, ttl: "1h" } }),
      webhookMiddleware({ secret: SECRET, dedupe: { store: inner, ttl: "1h" } }),
      (_req, res) => {
        runs++;
        res.status(200).send("ok");
      },
    );
    const server = await serve(createServer(app));
    const sent = await delivery(SECRET);
    const first = await post(server, sent);
    expect([first.status, first.text, runs]).toEqual([200, "ok", 1]);
    const copy = await post(server, sent);
    expect([copy.status, copy.duplicate, runs]).toEqual([204, "true", 1]);
    // The inner receiver marked it too: a copy that reaches it past the outer one is a duplicate.
    const id = JSON.parse(sent.body).id;
    expect(await inner.claim(id, 60_000)).toBe("done");
  });

  it("a route that fails behind two receivers: its own answer leaves, both release, and the retry runs it again", async () => {
    let runs = 0;
    const errors: unknown[] = [];
    const receiver = () =>
      webhookMiddleware({
        secret: SECRET,
        dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
        onError: (error) => void errors.push(error),
      });
    const app = express();
    app.post("/webhooks", express.raw({ type: "*/*" }), receiver(), receiver(), (_req, res) => {
      runs++;
      res.status(runs === 1 ? 500 : 200).send(`run ${runs}`);
    });
    const server = await serve(createServer(app));
    const sent = await delivery(SECRET);
    const failed = await post(server, sent);
    expect([failed.status, failed.text]).toEqual([500, "run 1"]);
    const retry = await post(server, sent);
    expect([retry.status, retry.text, runs, errors]).toEqual([200, "run 2", 2, []]);
  });

  it("compression between the two receivers compresses both a failure (passed on) and a held 2xx", async () => {
    let runs = 0;
    const body = (run: number) => `run ${run} `.repeat(500);
    const app = express();
    app.post(
      "/webhooks",
      express.raw({ type: "*/*" }),
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      compression({ threshold: 0 }),
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (_req, res) => {
        runs++;
        res
          .status(runs === 1 ? 500 : 200)
          .type("text/plain")
          .send(body(runs));
      },
    );
    const server = await serve(createServer(app));
    const sent = await delivery(SECRET);
    const gzip = { ...sent, headers: { ...sent.headers, "accept-encoding": "gzip" } };
    const seen = [];
    for (const answer of [await post(server, gzip), await post(server, gzip)]) {
      seen.push([answer.status, answer.headers.get("content-encoding"), answer.text]);
    }
    expect(seen).toEqual([
      [500, "gzip", body(1)],
      [200, "gzip", body(2)],
    ]);
  });

  it("a head held behind two receivers reads as sent to the route: a change to it is refused, as Node refuses it", async () => {
    const app = express();
    app.post(
      "/webhooks",
      express.raw({ type: "*/*" }),
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (_req, res) => {
        res.writeHead(200, { "x-first": "1" });
        let refused = "not refused";
        try {
          res.setHeader("x-second", "2");
        } catch (error) {
          refused = (error as { code?: string }).code ?? String(error);
        }
        res.end(refused);
      },
    );
    const server = await serve(createServer(app));
    const answer = await post(server, await delivery(SECRET));
    expect([answer.status, answer.text, answer.headers.get("x-first"), answer.headers.get("x-second")]).toEqual([
      200,
      "ERR_HTTP_HEADERS_SENT",
      "1",
      null,
    ]);
  });
});
