import { createServer, type ServerResponse } from "node:http";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { GatedStore } from "../support/gated-store.js";
import { post, serverPerTest } from "../support/http.js";

// Every ServerResponse method that writes, flushes or reads the head, called by a route on a 2xx
// that is held (node/watch-answer.ts), on bare node:http and on Express: some of Node's call the
// patched ones again (flushHeaders calls writeHead, setHeaders calls setHeader), one is another
// name for writeHead (writeHeader), the rest write around the head (writeProcessing,
// writeEarlyHints, addTrailers, cork; writeContinue, which needs a client that sent Expect, is in
// watch-answer.test.ts). Whichever a route calls, the 2xx leaves whole and only once the store has
// recorded the event, and a copy is then a duplicate.
// test/node/node-versions.test.ts runs this file on Node 22 and 24 too.

const SECRET = "held-methods-secret";
const serve = serverPerTest();

interface Style {
  name: string;
  /** The route's answer, a 2xx whose body is "ok"; `seen` gets what the route read back. */
  answer(res: ServerResponse, seen: string[]): void;
  /** What the route reads back, as it would on Node's own response once sent. */
  seen?: string[];
}

const styles: Style[] = [
  {
    name: "writeHead(200), then flushHeaders(), then end()",
    answer(res, seen) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.flushHeaders();
      seen.push(`sent ${res.headersSent}`);
      res.end("ok");
    },
    seen: ["sent true"],
  },
  {
    name: "flushHeaders() with no head written, a write, flushHeaders() again, end()",
    answer(res) {
      res.statusCode = 200;
      res.flushHeaders();
      res.write("o");
      res.flushHeaders();
      res.end("k");
    },
  },
  {
    name: "writeHeader(200), Node's old name for writeHead",
    answer(res, seen) {
      (res as unknown as { writeHeader: ServerResponse["writeHead"] }).writeHeader(200, { "x-a": "1" });
      seen.push(`sent ${res.headersSent}`);
      res.end("ok");
    },
    seen: ["sent true"],
  },
  {
    name: "setHeaders() before the head, and after it (refused as Node refuses it once sent)",
    answer(res, seen) {
      res.setHeaders(new Map([["x-a", "1"]]));
      res.writeHead(200);
      for (const headers of [new Map([["x-b", "1"]]), new Map()]) {
        try {
          res.setHeaders(headers);
        } catch (error) {
          seen.push((error as NodeJS.ErrnoException).code ?? "?");
        }
      }
      res.end("ok");
    },
    seen: ["ERR_HTTP_HEADERS_SENT", "ERR_HTTP_HEADERS_SENT"],
  },
  {
    name: "getHeader(), hasHeader(), getHeaderNames() after a head written with headers",
    answer(res, seen) {
      res.setHeader("x-before", "1");
      res.writeHead(200, { "x-a": "1" });
      const names = res.getHeaderNames().filter((name) => name !== "x-powered-by");
      seen.push(JSON.stringify([names, res.getHeader("x-a") ?? null, res.hasHeader("x-before")]));
      res.end("ok");
    },
    seen: ['[["x-before","x-a"],"1",true]'],
  },
  {
    name: "writeHead(200), then writeProcessing() and writeEarlyHints()",
    answer(res) {
      res.writeHead(200);
      res.writeProcessing();
      res.writeEarlyHints({ link: "</a.css>; rel=preload" });
      res.end("ok");
    },
  },
  {
    name: "writeHead(200) with a trailer, a write, addTrailers(), end()",
    answer(res) {
      res.writeHead(200, { trailer: "x-t" });
      res.write("ok");
      res.addTrailers({ "x-t": "v" });
      res.end();
    },
  },
  {
    name: "cork(), writeHead(200), writes, uncork() on the next tick, end()",
    answer(res) {
      res.cork();
      res.writeHead(200);
      res.write("o");
      res.write("k");
      process.nextTick(() => {
        res.uncork();
        res.end();
      });
    },
  },
  {
    name: "end(), then end(callback) again: the callback comes once the answer is sent",
    answer(res, seen) {
      res.writeHead(200);
      res.end("ok");
      res.end((error?: Error) => seen.push(`ended again ${error === undefined ? "ok" : String(error)}`));
    },
    seen: ["ended again ok"],
  },
  {
    name: "setTimeout() on the response, then writeHead(200) and end()",
    answer(res) {
      res.setTimeout(10_000);
      res.writeHead(200);
      res.end("ok");
    },
  },
];

/** The two hosts: bare node:http calling the Express middleware, and an Express app. */
const hosts = {
  "node:http": (store: GatedStore, route: (res: ServerResponse) => void) => {
    const middleware = webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } });
    return createServer((req, res) => void middleware(req, res, () => route(res)));
  },
  Express: (store: GatedStore, route: (res: ServerResponse) => void) => {
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } }), (_req, res) =>
      route(res),
    );
    return createServer(app);
  },
};

describe.each(Object.entries(hosts))("on %s, a held 2xx answered with", (_host, host) => {
  it.each(styles)("$name: leaves whole once the store has the event, and a copy is a duplicate", async (style) => {
    const store = new GatedStore();
    const seen: string[] = [];
    let runs = 0;
    const server = await serve(
      host(store, (res) => {
        runs++;
        style.answer(res, seen);
      }),
    );
    const d = await delivery(SECRET);
    const answer = post(server, d).then((reply) => ({ ...reply, recorded: store.recorded }));
    // The store records only when opened: a 2xx that left before would arrive meanwhile.
    setTimeout(() => store.open(), 150);
    const first = await answer;
    expect([first.status, first.text, first.recorded]).toEqual([200, "ok", true]);
    const copy = await post(server, d);
    expect([copy.status, copy.duplicate, runs]).toEqual([204, "true", 1]);
    expect(seen).toEqual(style.seen ?? []);
  });
});
