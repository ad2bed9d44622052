import { createServer, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import { MemoryDedupeStore, type Telemetry } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { createEvent, signedDelivery, signedRequest } from "flag-webhooks/testing";
import Koa from "koa";
import { describe, expect, it } from "vitest";
import { runCounter } from "../support/handler-runs.js";
import { attempt, serverPerTest, urlOf } from "../support/http.js";

// The receiver's one decision: a delivery is handled when its handler finished and its final
// answer is 2xx, decided once both are known. A claim is never released while the handler runs,
// whoever answered meanwhile (a response-timeout layer), and an answer cut mid-way settles too.

const SECRET = "whsec-settle";
const listenPerTest = serverPerTest();
const serve = async (server: Server) => urlOf(await listenPerTest(server));

/** A sender that retries every `every` ms for `during` ms whatever it was answered, as a storm of retries would. */
async function storm(url: string, during: number, every: number): Promise<number[]> {
  const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
  const answers: Promise<number>[] = [];
  const end = Date.now() + during;
  while (Date.now() < end) {
    answers.push(attempt(url, delivery));
    await sleep(every);
  }
  return Promise.all(answers);
}

describe("a response-timeout layer answers 503 while the handler still runs", () => {
  it("Express (a connect-timeout style layer before the middleware): never a second, concurrent run; copies get 409 meanwhile", async () => {
    const { count, work } = runCounter();
    const app = express();
    app.use((_req, res, next) => {
      const timer = setTimeout(() => {
        if (!res.headersSent) res.status(503).json({ error: "timeout" });
      }, 300);
      res.on("close", () => clearTimeout(timer));
      next();
    });
    app.post(
      "/webhooks",
      expressMiddleware({
        secret: SECRET,
        dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
        onEvent: () => work(900),
      }),
    );
    const answers = await storm(await serve(createServer(app)), 2500, 100);
    expect(count.most).toBe(1);
    expect(answers.filter((status) => status === 409).length).toBeGreaterThan(5);
    // Runs follow one another: at most one per 900 ms of handler.
    expect(count.runs).toBeLessThanOrEqual(3);
  });

  it("Koa (a koa-timeout style layer outside the middleware): never a second, concurrent run; copies get 409 meanwhile", async () => {
    const { count, work } = runCounter();
    const app = new Koa();
    app.use(async (ctx, next) => {
      await Promise.race([
        next(),
        sleep(300).then(() => {
          ctx.status = 503;
          ctx.body = { error: "timeout" };
        }),
      ]);
    });
    app.use(
      koaMiddleware({
        secret: SECRET,
        dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
        onEvent: () => work(900),
      }),
    );
    const answers = await storm(await serve(createServer(app.callback())), 2500, 100);
    expect(count.most).toBe(1);
    expect(answers.filter((status) => status === 409).length).toBeGreaterThan(5);
    expect(count.runs).toBeLessThanOrEqual(3);
  });
});

/** A Telemetry that records how each delivery ended. */
function recording() {
  const ended: { outcome: string; status: number | undefined }[] = [];
  const telemetry: Telemetry = {
    delivery: () => ({
      verified() {},
      store() {},
      run: (handler) => handler(),
      handler() {},
      end: (outcome, status) => void ended.push({ outcome, status }),
    }),
  };
  return { telemetry, ended };
}

describe("an Express route that begins its answer and then fails (next(err) after res.write)", () => {
  function app(options: Parameters<typeof expressMiddleware>[0], runs: { count: number }) {
    const made = express();
    made.post("/webhooks", expressMiddleware(options), (_req, res, next) => {
      runs.count++;
      res.status(200).write("partial");
      next(new Error("failed mid-answer"));
    });
    // Express's own final handler: it cannot answer a response whose head went out, and cuts the socket.
    return made;
  }

  it("with dedupe: the sender sees no 2xx, the claim is released at once (the retry runs, not 409), and the delivery's record ends", async () => {
    const runs = { count: 0 };
    const { telemetry, ended } = recording();
    const url = await serve(
      createServer(
        app(
          { secret: SECRET, telemetry, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" }, onError: () => {} },
          runs,
        ),
      ),
    );
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).not.toBe(200);
    await sleep(50);
    expect(ended).toEqual([{ outcome: "handler_error", status: undefined }]);
    expect(await attempt(url, delivery)).not.toBe(409);
    expect(runs.count).toBe(2);
  });

  it("without dedupe: the delivery's record ends when the socket is cut", async () => {
    const runs = { count: 0 };
    const { telemetry, ended } = recording();
    const url = await serve(createServer(app({ secret: SECRET, telemetry }, runs)));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).not.toBe(204);
    await sleep(50);
    expect(ended).toEqual([{ outcome: "handler_error", status: undefined }]);
  });
});

describe("an Express route that never answers a client that left", () => {
  it("the delivery's record ends when the client closes (client_closed); the claim stands: a retry gets 409", async () => {
    const { telemetry, ended } = recording();
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware({ secret: SECRET, telemetry, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (req) => {
        // Never answers: it waits for the client, which is gone.
        req.on("close", () => {});
      },
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const controller = new AbortController();
    const gone = fetch(url, {
      method: "POST",
      body: delivery.body,
      headers: delivery.headers,
      signal: controller.signal,
    });
    await sleep(100);
    controller.abort();
    await gone.catch(() => {});
    await sleep(100);
    expect(ended).toEqual([{ outcome: "client_closed", status: undefined }]);
    expect(await attempt(url, delivery)).toBe(409);
  });
});

describe("dedupe.ttl covers the replay window on every receiver of a fleet", () => {
  it("two receivers on one store, clocks 5 s apart: an event dated a minute ahead is never run twice, whenever a copy reaches the other", async () => {
    let real = Date.parse("2026-11-26T12:00:00Z");
    const store = new MemoryDedupeStore({ now: () => real });
    let runs = 0;
    const receiver = (skew: number) =>
      webhookHandler({
        secret: SECRET,
        maxAge: "5m",
        now: () => real + skew,
        dedupe: { store, ttl: "7m" },
        onEvent: () => void runs++,
      });
    const ahead = receiver(0);
    const behind = receiver(-5000);
    const event = createEvent("flag.updated", { createdAt: new Date(real + 60_000).toISOString() });
    expect((await ahead(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    for (let second = 1; second <= 400; second++) {
      real += 1000;
      const answer = await behind(await signedRequest({ secret: SECRET, event }));
      expect([204, 401], `${second} s later`).toContain(answer.status);
    }
    expect(runs).toBe(1);
  });

  it("refuses a ttl that would not: shorter than maxAge plus twice the minute of skew allowed", () => {
    const store = new MemoryDedupeStore();
    expect(() =>
      webhookHandler({ secret: SECRET, maxAge: "5m", dedupe: { store, ttl: "6m" }, onEvent: () => {} }),
    ).toThrow(/shorter than maxAge plus twice the 60 s clock-skew allowance/);
  });
});

describe("a handler that threw while the answer on the wire is 2xx", () => {
  it("Koa, an outer error handler that answers 200 anyway: not handled; the 2xx is replaced by the error's 500, the claim released, and the retry runs it again", async () => {
    const store = new MemoryDedupeStore();
    let runs = 0;
    const app = new Koa();
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch {
        // An app that swallows errors and still answers 200: the sender sees a 2xx.
        ctx.status = 200;
        ctx.body = "ok anyway";
      }
    });
    app.use(koaMiddleware({ secret: SECRET, dedupe: { store, ttl: "1h" } }));
    app.use(() => {
      runs++;
      throw new Error("the handler failed");
    });
    const url = await serve(createServer(app.callback()));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).toBe(500);
    expect(await attempt(url, delivery)).toBe(500);
    expect(runs).toBe(2);
  });
});

describe("a decision that waits for nothing is given at once, and its answer is never held", () => {
  it("Express, a memory store: the claim is made before next() returns, and the route's 2xx is Node's own when end() returns; a copy is a duplicate", async () => {
    const nextAtOnce: boolean[] = [];
    const middleware = expressMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } });
    const app = express();
    let writtenAtEnd = false;
    app.post(
      "/webhooks",
      express.raw({ type: "*/*" }),
      (req, res, next) => {
        let atOnce = false;
        void middleware(req, res, (error?: unknown) => {
          atOnce = true;
          next(error);
        });
        nextAtOnce.push(atOnce);
      },
      (_req, res) => {
        res.sendStatus(204);
        // Node sets `finished` when its own end() ran: a held answer has not reached it yet.
        writtenAtEnd = res.finished;
      },
    );
    const url = await serve(createServer(app));
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    expect(await attempt(url, delivery)).toBe(204);
    expect(writtenAtEnd).toBe(true);
    const copy = await fetch(url, { method: "POST", body: delivery.body, headers: delivery.headers });
    expect([copy.status, copy.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    // The copy is answered by the middleware, a duplicate: no next() at all.
    expect(nextAtOnce).toEqual([true, false]);
  });
});
