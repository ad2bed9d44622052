import { createServer, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import { describe, expect, it } from "vitest";
import { runCounter } from "../support/handler-runs.js";
import { attempt, serverPerTest, urlOf } from "../support/http.js";

// A response-timeout layer answers while the handler still runs, and the sender retries at once,
// again and again: the claim stands until the handler ends, so copies get 409 and runs follow one
// another. Kept apart from ./settle.test.ts because it counts answers over a timed storm, which a
// machine under load (a mutation run) can stretch.

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
