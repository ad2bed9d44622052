import { createServer, type Server } from "node:http";
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
import type { SignedDelivery } from "flag-webhooks/testing";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { expressServer } from "../support/express.js";
import { close, listen, post } from "../support/http.js";

// Handled once, through every adapter over real HTTP: a delivery counts as handled only once its
// handler finished with a 2xx answer, whatever the client did meanwhile (a copy meanwhile is 409);
// anything else releases the claim, so the sender's retry runs it.

const SECRET = "handled-once-secret";

/** How a handler of the scenario behaves: how long it works (or until `until` settles), and the status it answers with. */
interface Behaviour {
  ms: number;
  status: number;
  until?: Promise<void>;
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
  await (behaviour.until ?? sleep(behaviour.ms));
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
      return listen(
        expressServer({
          secret: SECRET,
          dedupe: dedupe(),
          onEvent: async () => {
            const behaviour = behave();
            await work(counter, behaviour);
            return { status: behaviour.status };
          },
        }),
      );
    },
  },
  {
    name: "Express with onEvent writing on res itself",
    async start(counter, behave) {
      return listen(
        expressServer({
          secret: SECRET,
          dedupe: dedupe(),
          onEvent: async (_event, _req, res: express.Response) => {
            const behaviour = behave();
            await work(counter, behaviour);
            res.status(behaviour.status).json({ done: true });
          },
        }),
      );
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
    name: "plain node:http with the Express middleware, flushing the head before the work",
    async start(counter, behave) {
      const middleware = expressMiddleware({ secret: SECRET, dedupe: dedupe() });
      return listen(
        createServer((req, res) => {
          void middleware(req, res, async () => {
            const behaviour = behave();
            res.writeHead(behaviour.status);
            res.flushHeaders();
            await work(counter, behaviour);
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

/** Resolves once `done()` holds, checked every 5 ms (within the test's own timeout). */
async function waitFor(done: () => boolean): Promise<void> {
  while (!done()) await sleep(5);
}

/** Sends the delivery to the server under test (aborted by `signal`, as a sender that gives up). */
const send = (d: SignedDelivery, signal?: AbortSignal) => post(server as Server, d, { signal });

describe.each(targets)("$name", (target) => {
  it("holds the claim while the handler works after the sender gave up: its retry is 409, never a second run", async () => {
    const counter: Counter = { runs: 0, running: 0, most: 0 };
    let finish!: () => void;
    const until = new Promise<void>((resolve) => {
      finish = resolve;
    });
    server = await target.start(counter, () => ({ ms: 0, status: 204, until }));
    const d = await delivery(SECRET);
    // The sender gives up and hangs up once the handler works (not after a fixed time: on a loaded
    // machine the request may not have reached the handler yet), and the handler goes on.
    const sender = new AbortController();
    const first = send(d, sender.signal);
    await waitFor(() => counter.running === 1);
    sender.abort();
    await expect(first).rejects.toThrow();
    const retry = await send(d);
    expect([retry.status, retry.code]).toEqual([409, "delivery_in_progress"]);
    // Once the handler finished with 2xx, a copy is a duplicate, and the handler ran once.
    finish();
    await waitFor(() => counter.running === 0);
    let later = await send(d);
    // The 2xx is decided a moment after the handler returned: until then a copy is in progress.
    for (let tries = 0; later.status === 409 && tries < 100; tries++) {
      await sleep(20);
      later = await send(d);
    }
    expect([later.status, later.duplicate]).toEqual([204, "true"]);
    expect([counter.runs, counter.most]).toEqual([1, 1]);
  });

  it.each([503, 500, 429, 404, 302])(
    "releases the claim when the handler answers %i, so the retry runs it",
    async (status) => {
      const counter: Counter = { runs: 0, running: 0, most: 0 };
      const statuses = [status, 204];
      server = await target.start(counter, () => ({ ms: 0, status: statuses.shift() ?? 204 }));
      const d = await delivery(SECRET);
      expect((await send(d)).status).toBe(status);
      expect((await send(d)).status).toBe(204);
      const third = await send(d);
      expect([third.status, third.duplicate]).toEqual([204, "true"]);
      expect(counter.runs).toBe(2);
    },
  );
});
