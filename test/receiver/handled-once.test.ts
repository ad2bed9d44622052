import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as honoMiddleware } from "flag-webhooks/hono";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import { webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "../support/http.js";
import { signedDelivery } from "../support/signed-delivery.js";

// Issue 15, items 1, 2 and 10, through every adapter over real HTTP: a delivery counts as handled
// only once its handler finished with a 2xx answer, whatever the client did meanwhile; anything
// else releases the claim; and a refusal answered before the body was read closes the connection.

const SECRET = "handled-once-secret";
const delivery = () => signedDelivery(SECRET);

/** How a handler of the scenario behaves: how long it works, and the status it answers with. */
interface Behaviour {
  ms: number;
  status: number;
}
interface Counter {
  runs: number;
  running: number;
  most: number;
}

/** Runs the handler's work, counting how many run at once. */
async function work(counter: Counter, behaviour: Behaviour): Promise<void> {
  counter.runs++;
  counter.running++;
  counter.most = Math.max(counter.most, counter.running);
  await sleep(behaviour.ms);
  counter.running--;
}

interface Target {
  name: string;
  /** A server whose handler answers each delivery as `behave()` says at the time. */
  start(counter: Counter, behave: () => Behaviour): Promise<Server>;
}

const dedupe = () => ({ store: new MemoryDedupeStore(), ttl: 60_000 });

const targets: Target[] = [
  {
    name: "Express, the route after the middleware",
    async start(counter, behave) {
      const app = express();
      app.post("/webhooks", expressMiddleware({ secret: SECRET, dedupe: dedupe() }), async (_req, res) => {
        const behaviour = behave();
        await work(counter, behaviour);
        res.sendStatus(behaviour.status);
      });
      return listen(createServer(app));
    },
  },
  {
    name: "Express with onEvent returning a reply",
    async start(counter, behave) {
      const app = express();
      app.post(
        "/webhooks",
        expressMiddleware({
          secret: SECRET,
          dedupe: dedupe(),
          onEvent: async () => {
            const behaviour = behave();
            await work(counter, behaviour);
            return { status: behaviour.status };
          },
        }),
      );
      return listen(createServer(app));
    },
  },
  {
    name: "Express with onEvent writing on res itself",
    async start(counter, behave) {
      const app = express();
      app.post(
        "/webhooks",
        expressMiddleware({
          secret: SECRET,
          dedupe: dedupe(),
          onEvent: async (_event, _req, res: express.Response) => {
            const behaviour = behave();
            await work(counter, behaviour);
            res.status(behaviour.status).json({ done: true });
          },
        }),
      );
      return listen(createServer(app));
    },
  },
  {
    name: "plain node:http with the Express middleware",
    async start(counter, behave) {
      const middleware = expressMiddleware({ secret: SECRET, dedupe: dedupe() });
      return listen(
        createServer((req, res) => {
          void middleware(req, res, async () => {
            const behaviour = behave();
            await work(counter, behaviour);
            res.statusCode = behaviour.status;
            res.end();
          });
        }),
      );
    },
  },
  {
    name: "Koa, the downstream middleware",
    async start(counter, behave) {
      const app = new Koa<WebhookState>();
      app.use(koaMiddleware({ secret: SECRET, dedupe: dedupe() }));
      app.use(async (ctx) => {
        const behaviour = behave();
        await work(counter, behaviour);
        ctx.status = behaviour.status;
      });
      return listen(createServer(app.callback()));
    },
  },
  {
    name: "Koa with onEvent setting ctx.status",
    async start(counter, behave) {
      const app = new Koa();
      app.use(
        koaMiddleware({
          secret: SECRET,
          dedupe: dedupe(),
          onEvent: async (_event, ctx) => {
            const behaviour = behave();
            await work(counter, behaviour);
            ctx.status = behaviour.status;
            ctx.body = "";
          },
        }),
      );
      return listen(createServer(app.callback()));
    },
  },
  {
    name: "Fastify with reply.code().send()",
    async start(counter, behave) {
      const app = Fastify();
      await app.register(webhookPlugin, {
        path: "/webhooks",
        secret: SECRET,
        dedupe: dedupe(),
        onEvent: async (_event, _request, reply) => {
          const behaviour = behave();
          await work(counter, behaviour);
          await reply.code(behaviour.status).send();
        },
      });
      await app.ready();
      return listen(app.server);
    },
  },
  {
    name: "Hono, the route after the middleware",
    async start(counter, behave) {
      const app = new Hono();
      app.post("/webhooks", honoMiddleware({ secret: SECRET, dedupe: dedupe() }), async (c) => {
        const behaviour = behave();
        await work(counter, behaviour);
        return c.body(null, behaviour.status as 204);
      });
      return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    },
  },
  {
    name: "fetch webhookHandler returning a Response",
    async start(counter, behave) {
      const handler = webhookHandler({
        secret: SECRET,
        dedupe: dedupe(),
        onEvent: async () => {
          const behaviour = behave();
          await work(counter, behaviour);
          return new Response(null, { status: behaviour.status });
        },
      });
      return listen(createAdaptorServer({ fetch: handler }) as Server);
    },
  },
  {
    name: "Lambda webhookHandler returning a proxy result (behind a node:http front)",
    async start(counter, behave) {
      const handler = lambdaHandler({
        secret: SECRET,
        dedupe: dedupe(),
        onEvent: async () => {
          const behaviour = behave();
          await work(counter, behaviour);
          return { statusCode: behaviour.status, body: "" };
        },
      });
      // API Gateway's part: the request in as a proxy event, the result out as the answer.
      return listen(
        createServer(async (req, res) => {
          const chunks: Buffer[] = [];
          for await (const chunk of req) chunks.push(chunk as Buffer);
          const result = await handler(
            {
              httpMethod: req.method ?? "",
              headers: req.headers as Record<string, string>,
              body: Buffer.concat(chunks).toString(),
            },
            { awsRequestId: "r", getRemainingTimeInMillis: () => 30_000 },
          );
          res.writeHead(result.statusCode, result.headers).end(result.body);
        }),
      );
    },
  },
];

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

async function post(d: ReturnType<typeof delivery>, signal?: AbortSignal) {
  const { port } = (server as Server).address() as { port: number };
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    body: d.body,
    headers: d.headers,
    signal,
  });
  const text = await response.text();
  return {
    status: response.status,
    duplicate: response.headers.get("webhook-duplicate"),
    code: text.startsWith("{") ? JSON.parse(text).error?.code : undefined,
  };
}

describe.each(targets)("$name", (target) => {
  it("holds the claim while the handler works after the sender gave up: its retry is 409, never a second run", async () => {
    const counter: Counter = { runs: 0, running: 0, most: 0 };
    server = await target.start(counter, () => ({ ms: 700, status: 204 }));
    const d = delivery();
    // The sender times out after 100 ms and hangs up, while the handler still works.
    await expect(post(d, AbortSignal.timeout(100))).rejects.toThrow();
    await sleep(50);
    const retry = await post(d);
    expect([retry.status, retry.code]).toEqual([409, "delivery_in_progress"]);
    // Once the handler finished with 2xx, a copy is a duplicate, and the handler ran once.
    await sleep(800);
    const later = await post(d);
    expect([later.status, later.duplicate]).toEqual([204, "true"]);
    expect([counter.runs, counter.most]).toEqual([1, 1]);
  });

  it.each([503, 500, 429, 404, 302])(
    "releases the claim when the handler answers %i, so the retry runs it",
    async (status) => {
      const counter: Counter = { runs: 0, running: 0, most: 0 };
      const statuses = [status, 204];
      server = await target.start(counter, () => ({ ms: 0, status: statuses.shift() ?? 204 }));
      const d = delivery();
      expect((await post(d)).status).toBe(status);
      expect((await post(d)).status).toBe(204);
      const third = await post(d);
      expect([third.status, third.duplicate]).toEqual([204, "true"]);
      expect(counter.runs).toBe(2);
    },
  );
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

describe.each(nodeServers)("$name: a refusal before the body was read closes the connection (issue 15)", ({ make }) => {
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
