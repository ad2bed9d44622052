import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import { describe, expect, it, onTestFinished } from "vitest";
import { runCounter } from "../support/handler-runs.js";
import { attempt, serverPerTest, urlOf } from "../support/http.js";

// A response-timeout layer in front of an Express route without onEvent: the route is the handler,
// and a retry sent while it still works must get 409, never a second run at once.

const SECRET = "whsec-attack-timeout";
const listenPerTest = serverPerTest();
const serve = async (server: Server) => urlOf(await listenPerTest(server));

/** A connect-timeout style layer: answers 503 after `ms` unless the answer began. */
function timeoutLayer(ms: number): express.RequestHandler {
  return (_req, res, next) => {
    const timer = setTimeout(() => {
      if (!res.headersSent) res.status(503).json({ error: "timeout" });
    }, ms);
    res.on("close", () => clearTimeout(timer));
    next();
  };
}

describe("Express without onEvent, a response-timeout layer answers 503 while the route still works", () => {
  // Fails: without onEvent the route's answer is the only sign it finished, so the layer's 503
  // (wherever the layer sits) settles the delivery and releases the claim while the route still
  // works; the retry runs it a second time, at once. Nothing tells the middleware reliably when an
  // Express route's work ends: a route that answers never calls next; the router keeps a route's
  // promise to itself (next() returns nothing to the layer before); and router 2.3's
  // "express.router.request" tracing channel publishes a promise's settling, but a callback-style
  // route's end as soon as it returns, before its work, and only once something subscribes, which
  // traces every layer of every app in the process. So the fix is onEvent (whose end is known) or
  // a layer that never answers for the route; docs/delivery.md says so.
  it.fails("a layer after the middleware: a retry during the route gets 409, one run at a time", async () => {
    const { count, work } = runCounter();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      timeoutLayer(100),
      async (_req, res) => {
        await work(600);
        if (!res.headersSent) res.sendStatus(204);
      },
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const first = await attempt(url, delivery);
    const retry = await attempt(url, delivery);
    await sleep(700);
    expect([first, retry, count.most]).toEqual([503, 409, 1]);
  });

  it("res.setTimeout cuts the socket while the route streams a 2xx: a retry during the route gets 409, one run at a time", async () => {
    const { count, work } = runCounter();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      async (_req, res) => {
        res.setTimeout(100);
        res.status(200).write("working");
        await work(600);
        res.end();
      },
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const first = await attempt(url, delivery);
    const retry = await attempt(url, delivery);
    await sleep(700);
    // The route ended its 2xx after the cut: the event is handled, and a later copy is a duplicate.
    const later = await attempt(url, delivery);
    expect([first, retry, later, count.runs, count.most]).toEqual([0, 409, 204, 1, 1]);
  });
});

describe("Node's own server timeouts while an Express route (no onEvent) streams a 2xx", () => {
  it.each([
    ["server.timeout (idle socket)", (server: Server) => server.setTimeout(100)],
    [
      "server.requestTimeout and headersTimeout",
      (server: Server) => {
        server.requestTimeout = 100;
        server.headersTimeout = 100;
      },
    ],
  ] as const)("%s: a retry during the route gets 409; the event handled once", async (_name, configure) => {
    const { count, work } = runCounter();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      async (_req, res) => {
        res.status(200).write("working");
        await work(600);
        res.end();
      },
    );
    const server = createServer(app);
    configure(server);
    const url = await serve(server);
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const first = attempt(url, delivery);
    await sleep(250);
    const retry = await attempt(url, delivery);
    await first;
    await sleep(700);
    const later = await attempt(url, delivery);
    expect([retry, later, count.runs, count.most]).toEqual([409, 204, 1, 1]);
  });
});

describe("the handler's end is known: a response-timeout layer's 503 leaves the claim standing until it ends", () => {
  it("Koa without onEvent (the middleware after it is the handler), the layer outside: 503, then 409, one run", async () => {
    const { count, work } = runCounter();
    const app = new Koa();
    app.use(async (ctx, next) => {
      await Promise.race([
        next(),
        sleep(100).then(() => {
          ctx.status = 503;
          ctx.body = { error: "timeout" };
        }),
      ]);
    });
    app.use(koaMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }));
    app.use(async (ctx) => {
      await work(600);
      ctx.status = 204;
    });
    const url = await serve(createServer(app.callback()));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const first = await attempt(url, delivery);
    const retry = await attempt(url, delivery);
    await sleep(700);
    // The handler ended, but its answer was the layer's 503: released, so the next copy runs it.
    const later = await attempt(url, delivery);
    expect([first, retry, later, count.runs, count.most]).toEqual([503, 409, 503, 2, 1]);
    await sleep(600);
  });

  it("Fastify onEvent, an onRequest hook that answers 503 on a timer: 503, then 409, one run", async () => {
    const { count, work } = runCounter();
    const app = Fastify();
    app.addHook("onRequest", (_request, reply, done) => {
      const timer = setTimeout(() => {
        if (!reply.sent) void reply.code(503).send({ error: "timeout" });
      }, 100);
      reply.raw.on("close", () => clearTimeout(timer));
      done();
    });
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent: () => work(600),
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    onTestFinished(() => app.close());
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/webhooks`;
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const first = await attempt(url, delivery);
    const retry = await attempt(url, delivery);
    await sleep(700);
    expect([first, retry, count.runs, count.most]).toEqual([503, 409, 1, 1]);
  });
});
