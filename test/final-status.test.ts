import { createServer, request, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "./support/http.js";
import { signedDelivery } from "./support/signed-delivery.js";

// Found by attacking issue 15 items 1 and 2 ("counts as handled only when the handler finished and the
// answer's FINAL status is 2xx"): in Express and Koa the status the receiver settles with is not
// always the status the sender gets. Failed on 832a504, before the fix.

const SECRET = "attack-final-secret";
const delivery = () => signedDelivery(SECRET);
const dedupe = () => ({ store: new MemoryDedupeStore(), ttl: 60_000 });

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

async function post(d: ReturnType<typeof delivery>) {
  const { port } = (server as Server).address() as { port: number };
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    body: d.body,
    headers: d.headers,
  });
  await response.arrayBuffer();
  return { status: response.status, duplicate: response.headers.get("webhook-duplicate") };
}

describe("Express, the route after the middleware", () => {
  it("a res.end() that throws (a number as the body) answers 500: the retry runs the route", async () => {
    let runs = 0;
    const app = express();
    app.post("/webhooks", expressMiddleware({ secret: SECRET, dedupe: dedupe() }), (_req, res) => {
      runs++;
      // A common slip: res.end(count). Node throws ERR_INVALID_ARG_TYPE before writing anything.
      if (runs === 1) res.status(200).end(42 as unknown as string);
      else res.sendStatus(204);
    });
    app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).end();
    });
    server = await listen(createServer(app));
    const d = delivery();
    expect((await post(d)).status).toBe(500);
    // Today: the wrapper settled 200 (done) before calling the real end(), which then threw.
    expect(await post(d)).toEqual({ status: 204, duplicate: null });
    expect(runs).toBe(2);
  });

  it("the status on the wire counts: 200 sent, then res.status(503) too late, is handled (a copy is a duplicate)", async () => {
    let runs = 0;
    const app = express();
    app.post("/webhooks", expressMiddleware({ secret: SECRET, dedupe: dedupe() }), (_req, res) => {
      runs++;
      res.status(200).write("partial ");
      // The route changes its mind after the head went out: Express sets statusCode silently.
      res.status(503).end("failed");
    });
    server = await listen(createServer(app));
    const d = delivery();
    expect((await post(d)).status).toBe(200);
    // Today: settled with res.statusCode (503), so the claim is released although the sender got
    // 200 and will not retry; the next copy of the event runs the route a second time.
    expect(await post(d)).toEqual({ status: 204, duplicate: "true" });
    expect(runs).toBe(1);
  });
});

describe("Koa: the answer Koa writes after the middleware chain is the final one", () => {
  it("downstream: a ctx.body Koa cannot serialise (a BigInt) is answered 500 by Koa: the retry runs", async () => {
    let runs = 0;
    const app = new Koa();
    app.silent = true;
    app.use(koaMiddleware({ secret: SECRET, dedupe: dedupe() }));
    app.use((ctx) => {
      runs++;
      ctx.status = 200;
      ctx.body = runs === 1 ? { count: 1n } : { count: 1 };
    });
    server = await listen(createServer(app.callback()));
    const d = delivery();
    expect((await post(d)).status).toBe(500);
    // Today: settled with ctx.status (200) before Koa's respond() threw in JSON.stringify.
    expect(await post(d)).toEqual({ status: 200, duplicate: null });
    expect(runs).toBe(2);
  });

  it("onEvent: the same ctx.body set by onEvent", async () => {
    let runs = 0;
    const app = new Koa();
    app.silent = true;
    app.use(
      koaMiddleware({
        secret: SECRET,
        dedupe: dedupe(),
        onEvent: (_event, ctx) => {
          runs++;
          ctx.status = 200;
          ctx.body = runs === 1 ? { count: 1n } : { count: 1 };
        },
      }),
    );
    server = await listen(createServer(app.callback()));
    const d = delivery();
    expect((await post(d)).status).toBe(500);
    expect(await post(d)).toEqual({ status: 200, duplicate: null });
    expect(runs).toBe(2);
  });

  it("onEvent's 204, turned into a 503 by an outer middleware after it: the 503 is sent, so the retry runs", async () => {
    let runs = 0;
    const app = new Koa();
    app.use(async (ctx, next) => {
      await next();
      if (runs === 1) ctx.status = 503; // an outer layer's verdict, after the webhook's answer
    });
    app.use(koaMiddleware({ secret: SECRET, dedupe: dedupe(), onEvent: () => void runs++ }));
    server = await listen(createServer(app.callback()));
    const d = delivery();
    expect((await post(d)).status).toBe(503);
    // Settled with onEvent's 204 instead of the status on the wire, the id would be done: a duplicate.
    expect(await post(d)).toEqual({ status: 204, duplicate: null });
    expect(runs).toBe(2);
  });

  it.each([
    ["without telemetry", {}],
    [
      "with telemetry",
      {
        telemetry: {
          delivery: () => ({ verified() {}, store() {}, run: <T>(fn: () => T) => fn(), handler() {}, end() {} }),
        },
      },
    ],
  ])(
    "a route that fails after the sender hung up, then an outer end() on ctx.res (%s): the id stays released, the retry runs",
    async (_, extra) => {
      // Koa settles twice here: once when the route throws with the client gone (Koa writes
      // nothing then), once more when the outer layer ends the response anyway. Only the first may
      // count: a second settle with end()'s 200 would mark a failed event done, and lose it.
      let runs = 0;
      let reached!: () => void;
      const routeReached = new Promise<void>((resolve) => {
        reached = resolve;
      });
      let ended!: () => void;
      const outerEnded = new Promise<void>((resolve) => {
        ended = resolve;
      });
      const app = new Koa();
      app.silent = true;
      app.use(async (ctx, next) => {
        try {
          await next();
        } catch {
          // A layer that answers 200 whatever happened, on the raw response, to a client already gone.
          ctx.res.statusCode = 200;
          ctx.res.end();
          ended();
        }
      });
      app.use(koaMiddleware({ secret: SECRET, dedupe: dedupe(), ...extra }));
      app.use(async (ctx) => {
        runs++;
        if (runs > 1) {
          ctx.status = 204;
          return;
        }
        const gone = new Promise((resolve) => ctx.res.once("close", resolve));
        reached();
        await gone;
        throw new Error("the handler failed after its sender hung up");
      });
      server = await listen(createServer(app.callback()));
      const { port } = server.address() as { port: number };
      const d = delivery();
      const client = request({ port, host: "127.0.0.1", path: "/webhooks", method: "POST", headers: d.headers });
      client.on("error", () => {}); // the hang-up below
      client.end(d.body);
      await routeReached;
      client.destroy();
      await outerEnded; // the route threw, and the outer layer ended the response
      expect(await post(d)).toEqual({ status: 204, duplicate: null });
      expect(runs).toBe(2);
    },
  );

  it("ctx.respond = false, answered later on ctx.res: the claim stands until that answer, so a copy meanwhile gets 409", async () => {
    let runs = 0;
    let running = 0;
    let most = 0;
    const app = new Koa();
    app.use(koaMiddleware({ secret: SECRET, dedupe: dedupe() }));
    app.use((ctx) => {
      // Koa's documented escape hatch: the route writes the raw response itself, when it is done.
      runs++;
      running++;
      most = Math.max(most, running);
      ctx.respond = false;
      setTimeout(() => {
        running--;
        ctx.res.statusCode = 204;
        ctx.res.end();
      }, 500);
    });
    server = await listen(createServer(app.callback()));
    const d = delivery();
    const first = post(d);
    await sleep(150);
    // Today: the claim was released as soon as next() resolved, with Koa's placeholder 404,
    // while the work went on: the copy runs it again, concurrently.
    const copy = await post(d);
    expect(copy.status).toBe(409);
    expect((await first).status).toBe(204);
    expect(await post(d)).toEqual({ status: 204, duplicate: "true" });
    expect([runs, most]).toEqual([1, 1]);
  });
});

describe("Fastify: reply.hijack(), answered later on reply.raw", () => {
  it("the claim stands until that answer (a copy meanwhile gets 409), and its 503 releases it", async () => {
    let runs = 0;
    let running = 0;
    let most = 0;
    const app = Fastify();
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      dedupe: dedupe(),
      onEvent: (_event, _request, reply) => {
        // Fastify's documented escape hatch: the route writes the raw response itself, when done.
        runs++;
        running++;
        most = Math.max(most, running);
        const status = runs === 1 ? 503 : 204;
        reply.hijack();
        setTimeout(() => {
          running--;
          reply.raw.statusCode = status;
          reply.raw.end();
        }, 400);
      },
    });
    await app.ready();
    server = await listen(app.server);
    const d = delivery();
    const first = post(d);
    await sleep(100);
    // Today: "204 duplicate": the id was marked done at hijack(), with Fastify's default 200,
    // before the handler finished; and its 503 then never releases it, so the event is lost.
    const copy = await post(d);
    expect(copy.status).toBe(409);
    expect((await first).status).toBe(503);
    expect(await post(d)).toEqual({ status: 204, duplicate: null });
    expect([runs, most]).toEqual([2, 1]);
  });
});

describe("telemetry of a delivery whose answer is cut", () => {
  it("res.destroy() by the route ends with no status (none was sent), not the 500 of a handler that threw", async () => {
    const log: string[] = [];
    const telemetry = {
      delivery: () => ({
        verified: () => {},
        store: () => {},
        run: <T>(fn: () => T) => fn(),
        handler: () => void log.push("handler"),
        end: (outcome: string, status: number | undefined) => void log.push(`end ${outcome} ${status}`),
      }),
    };
    const app = express();
    app.post("/webhooks", expressMiddleware({ secret: SECRET, dedupe: dedupe(), telemetry }), (_req, res) =>
      res.destroy(),
    );
    server = await listen(createServer(app));
    await expect(post(delivery())).rejects.toThrow(); // the sender sees the connection cut
    await expect.poll(() => log.length, { timeout: 2000 }).toBe(2);
    expect(log).toEqual(["handler", "end handler_error undefined"]);
  });
});
