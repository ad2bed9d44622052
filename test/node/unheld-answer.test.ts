import { createServer, type ServerResponse } from "node:http";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { post, serverPerTest } from "../support/http.js";

// The answer's watch (node/watch-answer.ts) is on every delivery with something to settle, and most
// of those answers are decided at once (a memory store marks the id done when the handler ends):
// they are never held, and the watch touches only what an answer begins, ends or is cut with. The
// methods that change the head are taken over only while a 2xx is held, and given back after.

const SECRET = "unheld-answer-secret";
const HEAD_METHODS = ["setHeader", "setHeaders", "appendHeader", "removeHeader"];
const serve = serverPerTest();

/** The head's methods that `res` holds as its own, rather than Node's from its prototype. */
function ownHeadMethods(res: ServerResponse): string[] {
  return HEAD_METHODS.filter((name) => Object.hasOwn(res, name));
}

describe("a memory-store delivery with onEvent, on node:http", () => {
  it("leaves the head's methods alone when its answer is decided at once", async () => {
    const seen: string[][] = [];
    const middleware = webhookMiddleware<import("node:http").IncomingMessage, ServerResponse>({
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
      onEvent: (_event, _req, res) => {
        res.once("finish", () => seen.push(ownHeadMethods(res)));
      },
    });
    const server = await serve(createServer((req, res) => void middleware(req, res)));
    const d = await delivery(SECRET);
    expect((await post(server, d)).status).toBe(204);
    const copy = await post(server, d);
    expect([copy.status, copy.duplicate]).toEqual([204, "true"]);
    expect(seen).toEqual([[]]);
  });

  it("refuses a change to a held head, and gives Node's methods back once it is released", async () => {
    const refused: unknown[] = [];
    const after: boolean[] = [];
    const middleware = webhookMiddleware<import("node:http").IncomingMessage, ServerResponse>({
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
      onEvent: async (_event, _req, res) => {
        res.once("finish", () =>
          after.push(HEAD_METHODS.every((name) => (res as never)[name] === Object.getPrototypeOf(res)[name])),
        );
        res.writeHead(200);
        try {
          res.setHeader("x-late", "1");
        } catch (error) {
          refused.push((error as { code?: unknown }).code);
        }
        res.end("ok");
      },
    });
    const server = await serve(createServer((req, res) => void middleware(req, res)));
    const reply = await post(server, await delivery(SECRET));
    expect([reply.status, reply.text]).toEqual([200, "ok"]);
    expect(refused).toEqual(["ERR_HTTP_HEADERS_SENT"]);
    expect(after).toEqual([true]);
  });
});
