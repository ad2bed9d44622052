import { createHmac } from "node:crypto";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { MemoryDedupeStore } from "flag-webhooks";
import { type KoaWebhookOptions, type WebhookState, webhookMiddleware } from "flag-webhooks/koa";
import Koa from "koa";
import { koaBody } from "koa-body";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "./support/http.js";
import { signedDelivery } from "./support/signed-delivery.js";

// The Koa middleware over real HTTP: what onEvent's own answers on ctx become, a downstream that
// throws, koa-body's unparsed body, and a client that hangs up while the handler still works.
const SECRET = "mutation-koa-secret";
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

async function start(app: Koa<WebhookState>): Promise<Server> {
  server = await listen(createServer(app.callback()));
  return server;
}

async function post(d: { body: string; headers: Record<string, string> }) {
  const { port } = (server as Server).address() as AddressInfo;
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    body: d.body,
    headers: d.headers,
  });
  return { status: response.status, text: await response.text(), duplicate: response.headers.get("webhook-duplicate") };
}

function withOnEvent(onEvent: KoaWebhookOptions["onEvent"]): Koa<WebhookState> {
  const app = new Koa<WebhookState>();
  app.use(webhookMiddleware({ secret: SECRET, onEvent }));
  return app;
}

describe("Koa middleware with onEvent", () => {
  it("answers 204 with no body when onEvent sets nothing on ctx", async () => {
    await start(withOnEvent(() => {}));
    expect(await post(signedDelivery(SECRET))).toMatchObject({ status: 204, text: "" });
  });

  it("keeps the body onEvent set on ctx", async () => {
    await start(
      withOnEvent((_event, ctx) => {
        ctx.body = "kept by the app";
      }),
    );
    expect(await post(signedDelivery(SECRET))).toMatchObject({ status: 200, text: "kept by the app" });
  });

  it("keeps the status onEvent set on ctx without a body", async () => {
    await start(
      withOnEvent((_event, ctx) => {
        ctx.status = 202;
      }),
    );
    expect(await post(signedDelivery(SECRET))).toMatchObject({ status: 202, text: "Accepted" });
  });

  it("answers a { status } reply without a body with an empty body", async () => {
    await start(withOnEvent(() => ({ status: 202, headers: { "x-queued": "yes" } })));
    const { port } = (server as Server).address() as AddressInfo;
    const d = signedDelivery(SECRET);
    const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
      method: "POST",
      body: d.body,
      headers: d.headers,
    });
    expect([response.status, response.headers.get("x-queued"), await response.text()]).toEqual([202, "yes", ""]);
  });
});

describe("Koa middleware without onEvent", () => {
  it("lets what the next middleware threw reach Koa's error handler as it is, answered 500", async () => {
    const app = new Koa<WebhookState>();
    const errors: unknown[] = [];
    app.silent = true;
    app.on("error", (error) => errors.push(error));
    app.use(webhookMiddleware({ secret: SECRET }));
    app.use(() => {
      throw new Error("downstream broke");
    });
    await start(app);
    expect((await post(signedDelivery(SECRET))).status).toBe(500);
    expect(errors.map((error) => (error as Error).message)).toEqual(["downstream broke"]);
  });

  it("verifies the exact bytes koa-body keeps with includeUnparsed", async () => {
    const app = new Koa<WebhookState>();
    app.use(koaBody({ includeUnparsed: true }));
    app.use(webhookMiddleware({ secret: SECRET }));
    app.use((ctx) => {
      ctx.body = { id: ctx.state.webhookEvent.id };
    });
    await start(app);
    const d = signedDelivery(SECRET);
    // Pretty-printed: the parsed body serialised again would be other bytes.
    const pretty = JSON.stringify(JSON.parse(d.body), null, 2);
    const headers = { ...d.headers, "service-signature": createHmac("sha256", SECRET).update(pretty).digest("hex") };
    const answer = await post({ body: pretty, headers });
    expect([answer.status, JSON.parse(answer.text).id]).toEqual([200, JSON.parse(d.body).id]);
  });

  it("verifies the unparsed text koa-body before v7 kept under Symbol.for('unparsedBody')", async () => {
    const app = new Koa<WebhookState>();
    // What koa-body 4-6 did with includeUnparsed: the parsed body, with the text under the symbol.
    app.use(async (ctx, next) => {
      const chunks: Buffer[] = [];
      for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
      const text = Buffer.concat(chunks).toString("utf8");
      (ctx.request as { body?: unknown }).body = { ...JSON.parse(text), [Symbol.for("unparsedBody")]: text };
      await next();
    });
    app.use(webhookMiddleware({ secret: SECRET }));
    app.use((ctx) => {
      ctx.body = ctx.state.webhookEvent.id;
    });
    await start(app);
    const d = signedDelivery(SECRET);
    const pretty = JSON.stringify(JSON.parse(d.body), null, 2);
    const headers = { ...d.headers, "service-signature": createHmac("sha256", SECRET).update(pretty).digest("hex") };
    expect(await post({ body: pretty, headers })).toMatchObject({ status: 200, text: JSON.parse(d.body).id });
  });

  it("settles with the 500 Koa answers for a body it cannot send, not the status the route set", async () => {
    let runs = 0;
    const app = new Koa<WebhookState>();
    app.silent = true;
    app.use(webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }));
    app.use((ctx) => {
      runs++;
      ctx.status = 200;
      // JSON.stringify throws on a BigInt: Koa answers its own 500.
      ctx.body = runs === 1 ? { count: 1n } : { count: 2 };
    });
    await start(app);
    const d = signedDelivery(SECRET);
    expect((await post(d)).status).toBe(500);
    const retry = await post(d);
    expect([retry.status, retry.text, runs]).toEqual([200, '{"count":2}', 2]);
  });

  it("reads the stream when a middleware set ctx.request.body to null without reading it", async () => {
    const app = new Koa<WebhookState>();
    app.use(async (ctx, next) => {
      (ctx.request as { body?: unknown }).body = null;
      await next();
    });
    app.use(webhookMiddleware({ secret: SECRET }));
    app.use((ctx) => {
      ctx.body = ctx.state.webhookEvent.type;
    });
    await start(app);
    expect(await post(signedDelivery(SECRET))).toMatchObject({ status: 200, text: "flag.updated" });
  });
});

describe("Koa without dedupe, when the client hangs up while the handler works", () => {
  it("finishes the handler without an error of its own", async () => {
    const errors: unknown[] = [];
    let finished = false;
    const app = new Koa<WebhookState>();
    app.silent = true;
    app.on("error", (error) => errors.push(error));
    app.use(webhookMiddleware({ secret: SECRET }));
    app.use(async (ctx) => {
      await new Promise((gone) => ctx.res.once("close", gone));
      ctx.body = "nobody reads this";
      finished = true;
    });
    await start(app);
    const { port } = (server as Server).address() as AddressInfo;
    const d = signedDelivery(SECRET);
    const req = httpRequest({ host: "127.0.0.1", port, path: "/webhooks", method: "POST", headers: d.headers });
    req.on("error", () => {});
    req.end(d.body);
    await sleep(100);
    req.destroy();
    for (let i = 0; i < 100 && !finished; i++) await sleep(5);
    await sleep(20);
    expect([finished, errors]).toEqual([true, []]);
  });
});

describe("Koa with dedupe, when the client hangs up while the handler works", () => {
  /** The app's handler waits until the client is gone, then ends as `finish` says. */
  function app(finish: (ctx: Koa.Context) => void) {
    let runs = 0;
    const koa = new Koa<WebhookState>();
    koa.silent = true;
    koa.use(
      webhookMiddleware({
        secret: SECRET,
        dedupe: { store: new MemoryDedupeStore(), ttl: "1h", inFlightTtl: "1h" },
      }),
    );
    koa.use(async (ctx) => {
      runs++;
      if (runs === 1) {
        await new Promise((gone) => ctx.res.once("close", gone));
        finish(ctx as unknown as Koa.Context);
        return;
      }
      ctx.body = "second run";
    });
    return { koa, runs: () => runs };
  }

  /** Sends a delivery and hangs up once the handler runs. */
  async function sendAndHangUp(d: { body: string; headers: Record<string, string> }, running: () => boolean) {
    const { port } = (server as Server).address() as AddressInfo;
    const req = httpRequest({ host: "127.0.0.1", port, path: "/webhooks", method: "POST", headers: d.headers });
    req.on("error", () => {});
    req.end(d.body);
    for (let i = 0; i < 200 && !running(); i++) await sleep(5);
    req.destroy();
  }

  /** The retry's answer once it is no longer 409 (the first delivery still in flight), or the last 409. */
  async function retry(d: { body: string; headers: Record<string, string> }) {
    let answer = await post(d);
    for (let i = 0; i < 40 && answer.status === 409; i++) {
      await sleep(25);
      answer = await post(d);
    }
    return answer;
  }

  it("marks the event handled at once when the handler ends with a 2xx nobody could receive", async () => {
    const { koa, runs } = app((ctx) => {
      ctx.status = 200;
      ctx.body = "done";
    });
    await start(koa);
    const d = signedDelivery(SECRET);
    await sendAndHangUp(d, () => runs() > 0);
    const answer = await retry(d);
    expect([answer.status, answer.duplicate, runs()]).toEqual([204, "true", 1]);
  });

  it("with ctx.respond = false, waits for the answer the app writes on ctx.res after the client left", async () => {
    const { koa, runs } = app((ctx) => {
      ctx.respond = false;
      // The app answers on ctx.res itself, later: that answer, not ctx's default 404, settles the claim.
      setTimeout(() => {
        ctx.res.statusCode = 200;
        ctx.res.end("late");
      }, 30);
    });
    await start(koa);
    const d = signedDelivery(SECRET);
    await sendAndHangUp(d, () => runs() > 0);
    await sleep(10);
    const answer = await retry(d);
    expect([answer.status, answer.duplicate, runs()]).toEqual([204, "true", 1]);
  });

  it("releases the claim at once when the handler ends with a 5xx or throws, so the retry runs it", async () => {
    for (const finish of [
      (ctx: Koa.Context) => {
        ctx.status = 503;
      },
      () => {
        throw new Error("failed after the client left");
      },
    ]) {
      const { koa, runs } = app(finish);
      await start(koa);
      const d = signedDelivery(SECRET);
      await sendAndHangUp(d, () => runs() > 0);
      const answer = await retry(d);
      expect([answer.status, answer.text, runs()]).toEqual([200, "second run", 2]);
      await close(server);
    }
  });
});
