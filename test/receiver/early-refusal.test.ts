import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware } from "flag-webhooks/hono";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "../support/http.js";

// A refusal answered before the body was read (no signature, a method other than POST) closes
// the connection, so the unread body is never drained: a sender of an unsigned gigabyte, or a
// slow-loris one trickling it, is cut off at once. On Node adapters the receiver ends the
// socket; for the fetch handler and Hono on @hono/node-server the answer says Connection: close
// (kept alive, node-server would go on reading the body until its own drain gave up: 150-190 MiB
// in about 0.5 s, against 4 MiB in under 10 ms with the close).

const SECRET = "early-refusal-secret";

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

/** The head of the answer to an unsigned POST that announces 1 GiB and sends its first 64 KiB. */
function unsignedHead(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write("POST /webhooks HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1073741824\r\n\r\n");
      socket.write(Buffer.alloc(65_536, 0x61));
    });
    let data = "";
    socket.on("data", (chunk: Buffer) => {
      data += chunk.toString("latin1");
      const end = data.indexOf("\r\n\r\n");
      if (end >= 0) {
        socket.destroy();
        resolve(data.slice(0, end));
      }
    });
    socket.on("error", reject);
  });
}

describe("an early refusal on @hono/node-server closes the connection (Connection: close)", () => {
  it.each([
    [
      "Hono middleware",
      () => {
        const app = new Hono();
        app.all("/webhooks", webhookMiddleware({ secret: SECRET }), (c) => c.body(null, 204));
        return app.fetch;
      },
    ],
    ["fetch webhookHandler", () => webhookHandler({ secret: SECRET, onEvent: () => undefined })],
  ])("%s", async (_name, make) => {
    server = await listen(createAdaptorServer({ fetch: make() }) as Server);
    const head = await unsignedHead((server.address() as { port: number }).port);
    expect(head).toMatch(/^HTTP\/1\.1 401/);
    expect(head).toMatch(/\r\nconnection: close(\r\n|$)/i);
  });
});

/** Node adapters, each with a handler that must never run for an unsigned request. */
const nodeServers: { name: string; make(): Promise<Server> }[] = [
  {
    name: "Express",
    async make() {
      const app = express();
      app.all("/webhooks", expressMiddleware({ secret: SECRET, onEvent: () => undefined }));
      return listen(createServer(app));
    },
  },
  {
    name: "Koa",
    async make() {
      const app = new Koa();
      app.use(koaMiddleware({ secret: SECRET, onEvent: () => undefined }));
      return listen(createServer(app.callback()));
    },
  },
  {
    name: "Fastify",
    async make() {
      const app = Fastify();
      await app.register(webhookPlugin, { path: "/webhooks", secret: SECRET, onEvent: () => undefined });
      await app.ready();
      return listen(app.server);
    },
  },
  {
    name: "plain node:http",
    async make() {
      const middleware = expressMiddleware({ secret: SECRET, onEvent: () => undefined });
      return listen(createServer((req, res) => void middleware(req, res, () => res.end())));
    },
  },
];

describe.each(nodeServers)("$name: a refusal before the body was read closes the connection", ({ make }) => {
  it.each([
    ["an unsigned POST announcing 1 GiB and trickling it", "POST", ""],
    ["a PUT announcing 1 GiB", "PUT", `service-signature: ${"a".repeat(64)}\r\n`],
  ])("%s: answered, then closed, without reading the body", async (_name, method, extra) => {
    server = await make();
    const { port } = server.address() as { port: number };
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString();
    });
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.on("error", () => undefined);
    socket.write(
      `${method} /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${extra}content-length: ${2 ** 30}\r\n\r\n`,
    );
    // A client that keeps sending one byte at a time, as a slow-loris sender would.
    let sent = 0;
    let open = true;
    void closed.then(() => {
      open = false;
    });
    const trickle = (async () => {
      while (open && sent < 200) {
        socket.write("x");
        sent++;
        await sleep(25);
      }
    })();
    await closed;
    await trickle;
    expect(answer).toMatch(method === "POST" ? /^HTTP\/1\.1 401/ : /^HTTP\/1\.1 405/);
    expect(answer.toLowerCase()).toContain("connection: close");
    // Closed while the trickle went on: 200 bytes would take 5 s.
    expect(sent).toBeLessThan(200);
  });
});
