import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { bodyParser } from "@koa/bodyparser";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { type KoaWebhookOptions, type WebhookState, webhookMiddleware } from "flag-webhooks/koa";
import type { SignedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import { koaBody } from "koa-body";
import supertest from "supertest";
import { describe, expect, it, vi } from "vitest";
import { delivery, signatureOf, signedHeaders } from "../support/deliveries.js";
import { close, post, serverPerTest } from "../support/http.js";
import { vector } from "../support/vectors.js";

// The Koa middleware in real Koa 3 apps: the body parsers before it (and the decoded text they
// keep), what onEvent's own answers on ctx become, a downstream that throws, a client that hangs
// up while the handler works, and the answer Koa writes last, which is the one that settles the
// claim. The shared case table: conformance.test.ts.

const { secret, body, signature } = vector("flag-updated-compact");
const pretty = vector("flag-updated-pretty");
const sign = (bytes: Buffer) => signatureOf(secret, bytes);

const SECRET = "koa-secret";
const serve = serverPerTest();
let server: Server | undefined;

/** Serves the app over HTTP for the test. */
async function start(app: Koa<WebhookState> | Koa): Promise<Server> {
  server = await serve(createServer(app.callback()));
  return server;
}

/** POSTs a delivery to the app under test. */
const send = (d: SignedDelivery) => post(server as Server, d);

function app(before: Koa.Middleware[] = [], limit?: number) {
  const application = new Koa<WebhookState>();
  const reached = vi.fn();
  for (const middleware of before) application.use(middleware);
  application.use(webhookMiddleware({ secret, limit }));
  application.use((ctx) => {
    reached();
    const event = ctx.state.webhookEvent;
    ctx.body = { type: event.type, flag: event.type === "flag.updated" && event.data.flag };
  });
  return { server: application.callback(), reached };
}

describe("Koa middleware", () => {
  it("sets ctx.state.webhookEvent and runs the next middleware", async () => {
    const { server, reached } = app();
    const res = await supertest(server).post("/").set("service-signature", signature).send(body);
    expect(res.body).toEqual({ type: "flag.updated", flag: "new-checkout" });
    expect(reached).toHaveBeenCalledOnce();
  });

  it("answers a refused delivery as JSON and does not call next", async () => {
    const { server, reached } = app();
    const res = await supertest(server).post("/").send(body);
    expect(res.status).toBe(401);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.body.error.code).toBe("missing_signature");
    expect(reached).not.toHaveBeenCalled();
  });

  it("uses ctx.request.rawBody kept by @koa/bodyparser", async () => {
    const { server } = app([bodyParser()]);
    const res = await supertest(server)
      .post("/")
      .set("content-type", "application/json")
      .set("service-signature", pretty.signature)
      .send(pretty.body.toString());
    expect(res.body).toEqual({ type: "flag.updated", flag: "new-checkout" });
  });

  it("explains body_already_parsed when a parser consumed the stream and kept no raw body", async () => {
    const parseOnly: Koa.Middleware = async (ctx, next) => {
      const chunks: Buffer[] = [];
      for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
      (ctx.request as { body?: unknown }).body = JSON.parse(Buffer.concat(chunks).toString());
      await next();
    };
    const { server, reached } = app([parseOnly]);
    const res = await supertest(server)
      .post("/")
      .set("content-type", "application/json")
      .set("service-signature", signature)
      .send(body.toString());
    expect([res.status, res.body.error.code]).toEqual([500, "body_already_parsed"]);
    expect(res.body.error.message).toMatch(/^ctx\.request\.body was already parsed/);
    // Koa's own fix, not Express's.
    expect(res.body.error.message).toMatch(/before the body parser \(@koa\/bodyparser, koa-bodyparser, koa-body\)/);
    expect(res.body.error.message).not.toMatch(/express/);
    expect(reached).not.toHaveBeenCalled();
  });

  it("measures a rawBody string left by a body parser as UTF-8 bytes against the limit, and closes on 413", async () => {
    const { server, reached } = app([bodyParser()], 100);
    const res = await supertest(server)
      .post("/")
      .set("content-type", "application/json")
      .set("service-signature", signature)
      .send(body.toString());
    expect([res.status, res.body.error.code, res.headers.connection]).toEqual([413, "payload_too_large", "close"]);
    expect(reached).not.toHaveBeenCalled();
  });

  it("checks options when it is created", () => {
    expect(() => webhookMiddleware({ secret: "" })).toThrow(/"secret"/);
    expect(() => webhookMiddleware({ secret, limit: "1 tonne" })).toThrow(/"limit"/);
  });
});

describe("Koa body parsers keep decoded text, not bytes", () => {
  // A correctly signed body that starts with a UTF-8 byte order mark: only the bytes verify.
  const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);

  function server(parser: Koa.Middleware, before: boolean) {
    const app = new Koa<WebhookState>();
    if (before) {
      // Ours first, answering itself, so the parser (there for the app's other routes) never
      // runs on a delivery whose stream we read.
      app.use(webhookMiddleware({ secret, onEvent: (event) => ({ status: 200, body: { type: event.type } }) }));
      app.use(parser);
    } else {
      app.use(parser);
      app.use(webhookMiddleware({ secret }));
      app.use((ctx) => {
        ctx.body = { type: (ctx.state.webhookEvent as WebhookEvent).type };
      });
    }
    return createServer(app.callback());
  }
  const post = (s: ReturnType<typeof server>, bytes: Buffer, sig: string) =>
    // A string, which supertest sends as its UTF-8 bytes; a Buffer with a JSON type is re-serialised.
    supertest(s).post("/").set("content-type", "application/json").set("service-signature", sig).send(bytes.toString());

  it("verifies a BOM body when our middleware is mounted before the parser", async () => {
    const res = await post(server(bodyParser(), true), withBom, await sign(withBom));
    // The bytes verify, and the event parses (UTF-8 decoding drops the BOM).
    expect([res.status, res.body.type]).toEqual([200, "flag.updated"]);
  });

  it("refuses the same body as 401 behind @koa/bodyparser, whose rawBody lost the BOM", async () => {
    const res = await post(server(bodyParser(), false), withBom, await sign(withBom));
    expect([res.status, res.body.error?.code]).toEqual([401, "invalid_signature"]);
  });

  it("verifies the exact text koa-body keeps with includeUnparsed, a pretty-printed body too, but that text is decoded: a body with a byte order mark is refused", async () => {
    const ok = await post(server(koaBody({ includeUnparsed: true }), false), body, signature);
    expect([ok.status, ok.body.type]).toEqual([200, "flag.updated"]);
    // Pretty-printed: the parsed body serialised again would be other bytes.
    const pretty = Buffer.from(JSON.stringify(JSON.parse(body.toString()), null, 2));
    const spaced = await post(server(koaBody({ includeUnparsed: true }), false), pretty, await sign(pretty));
    expect([spaced.status, spaced.body.type]).toEqual([200, "flag.updated"]);
    const bom = await post(server(koaBody({ includeUnparsed: true }), false), withBom, await sign(withBom));
    expect([bom.status, bom.body.error?.code]).toEqual([401, "invalid_signature"]);
  });
});

function withOnEvent(onEvent: KoaWebhookOptions["onEvent"]): Koa<WebhookState> {
  const app = new Koa<WebhookState>();
  app.use(webhookMiddleware({ secret: SECRET, onEvent }));
  return app;
}

describe("Koa middleware with onEvent, over real HTTP", () => {
  it("answers 204 with no body when onEvent sets nothing on ctx", async () => {
    await start(withOnEvent(() => {}));
    expect(await send(await delivery(SECRET))).toMatchObject({ status: 204, text: "" });
  });

  it("keeps the body onEvent set on ctx", async () => {
    await start(
      withOnEvent((_event, ctx) => {
        ctx.body = "kept by the app";
      }),
    );
    expect(await send(await delivery(SECRET))).toMatchObject({ status: 200, text: "kept by the app" });
  });

  it("keeps the status onEvent set on ctx without a body", async () => {
    await start(
      withOnEvent((_event, ctx) => {
        ctx.status = 202;
      }),
    );
    expect(await send(await delivery(SECRET))).toMatchObject({ status: 202, text: "Accepted" });
  });

  it("answers a { status } reply without a body with an empty body", async () => {
    await start(withOnEvent(() => ({ status: 202, headers: { "x-queued": "yes" } })));
    const answer = await send(await delivery(SECRET));
    expect([answer.status, answer.headers.get("x-queued"), answer.text]).toEqual([202, "yes", ""]);
  });
});

describe("Koa middleware without onEvent, over real HTTP", () => {
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
    expect((await send(await delivery(SECRET))).status).toBe(500);
    expect(errors.map((error) => (error as Error).message)).toEqual(["downstream broke"]);
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
    const d = await delivery(SECRET);
    const pretty = JSON.stringify(JSON.parse(d.body), null, 2);
    const headers = await signedHeaders(SECRET, pretty);
    expect(await send({ body: pretty, headers })).toMatchObject({ status: 200, text: JSON.parse(d.body).id });
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
    expect(await send(await delivery(SECRET))).toMatchObject({ status: 200, text: "flag.updated" });
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
    const d = await delivery(SECRET);
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
  async function sendAndHangUp(d: SignedDelivery, running: () => boolean) {
    const { port } = (server as Server).address() as AddressInfo;
    const req = httpRequest({ host: "127.0.0.1", port, path: "/webhooks", method: "POST", headers: d.headers });
    req.on("error", () => {});
    req.end(d.body);
    for (let i = 0; i < 200 && !running(); i++) await sleep(5);
    req.destroy();
  }

  /** The retry's answer once it is no longer 409 (the first delivery still in flight), or the last 409. */
  async function retry(d: SignedDelivery) {
    let answer = await send(d);
    for (let i = 0; i < 40 && answer.status === 409; i++) {
      await sleep(25);
      answer = await send(d);
    }
    return answer;
  }

  it("marks the event handled at once when the handler ends with a 2xx nobody could receive", async () => {
    const { koa, runs } = app((ctx) => {
      ctx.status = 200;
      ctx.body = "done";
    });
    await start(koa);
    const d = await delivery(SECRET);
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
    const d = await delivery(SECRET);
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
      const d = await delivery(SECRET);
      await sendAndHangUp(d, () => runs() > 0);
      const answer = await retry(d);
      expect([answer.status, answer.text, runs()]).toEqual([200, "second run", 2]);
      await close(server);
    }
  });
});

describe("the answer Koa writes after the middleware chain settles the claim", () => {
  it("downstream: a ctx.body Koa cannot serialise (a BigInt) is answered 500 by Koa, not the status the route set: the retry runs", async () => {
    let runs = 0;
    const app = new Koa<WebhookState>();
    app.silent = true;
    app.use(webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }));
    app.use((ctx) => {
      runs++;
      ctx.status = 200;
      // JSON.stringify throws on a BigInt: Koa answers its own 500.
      ctx.body = runs === 1 ? { count: 1n } : { count: 2 };
    });
    await start(app);
    const d = await delivery(SECRET);
    expect((await send(d)).status).toBe(500);
    // Not settled with ctx.status (200): Koa's respond() threw in JSON.stringify, and answered 500.
    const retry = await send(d);
    expect([retry.status, retry.text, retry.duplicate, runs]).toEqual([200, '{"count":2}', null, 2]);
  });

  it("onEvent: the same ctx.body set by onEvent", async () => {
    let runs = 0;
    const app = new Koa();
    app.silent = true;
    app.use(
      webhookMiddleware({
        secret: SECRET,
        dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
        onEvent: (_event, ctx) => {
          runs++;
          ctx.status = 200;
          ctx.body = runs === 1 ? { count: 1n } : { count: 1 };
        },
      }),
    );
    await start(app);
    const d = await delivery(SECRET);
    expect((await send(d)).status).toBe(500);
    expect(await send(d)).toMatchObject({ status: 200, duplicate: null });
    expect(runs).toBe(2);
  });

  it("onEvent's 204, turned into a 503 by an outer middleware after it: the 503 is sent, so the retry runs", async () => {
    let runs = 0;
    const app = new Koa();
    app.use(async (ctx, next) => {
      await next();
      if (runs === 1) ctx.status = 503; // an outer layer's verdict, after the webhook's answer
    });
    app.use(
      webhookMiddleware({
        secret: SECRET,
        dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
        onEvent: () => void runs++,
      }),
    );
    await start(app);
    const d = await delivery(SECRET);
    expect((await send(d)).status).toBe(503);
    // Settled with onEvent's 204 instead of the status on the wire, the id would be done: a duplicate.
    expect(await send(d)).toMatchObject({ status: 204, duplicate: null });
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
      app.use(webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 }, ...extra }));
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
      await start(app);
      const { port } = (server as Server).address() as AddressInfo;
      const d = await delivery(SECRET);
      const client = httpRequest({ port, host: "127.0.0.1", path: "/webhooks", method: "POST", headers: d.headers });
      client.on("error", () => {}); // the hang-up below
      client.end(d.body);
      await routeReached;
      client.destroy();
      await outerEnded; // the route threw, and the outer layer ended the response
      expect(await send(d)).toMatchObject({ status: 204, duplicate: null });
      expect(runs).toBe(2);
    },
  );

  it("ctx.respond = false, answered later on ctx.res: the claim stands until that answer, so a copy meanwhile gets 409", async () => {
    let runs = 0;
    let running = 0;
    let most = 0;
    const app = new Koa();
    app.use(webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }));
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
    await start(app);
    const d = await delivery(SECRET);
    const first = send(d);
    await sleep(150);
    // Not released when next() resolved, with Koa's placeholder 404, while the work goes on: the
    // copy would run it again, concurrently.
    const copy = await send(d);
    expect(copy.status).toBe(409);
    expect((await first).status).toBe(204);
    expect(await send(d)).toMatchObject({ status: 204, duplicate: "true" });
    expect([runs, most]).toEqual([1, 1]);
  });
});
