import { createServer, type Server } from "node:http";
import express from "express";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "../support/http.js";
import { signedDelivery } from "../support/signed-delivery.js";

// Found by attacking issue 15 item 2 ("any answer that is not 2xx must release the claim"): values that
// onEvent returns which the receiver does not recognise, or cannot write, must never turn into a
// 2xx that marks the event handled. Failed on 832a504, before the fix.

const SECRET = "attack-reply-secret";
const delivery = () => signedDelivery(SECRET);
const dedupe = () => ({ store: new MemoryDedupeStore(), ttl: 60_000 });
const quiet = () => undefined;

describe("fetch: a returned reply whose status is no HTTP status is not a 204 that marks the event done", () => {
  it.each<[string, unknown]>([
    ["a string status", "503"],
    ["a status above 599", 600],
    ["a 1xx status", 199],
    ["a fractional status", 503.5],
  ])("%s", async (_name, status) => {
    let runs = 0;
    const handler = webhookHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: quiet,
      onEvent: () => {
        runs++;
        return runs === 1 ? { status } : undefined;
      },
    });
    const d = delivery();
    const request = () =>
      new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers });
    const first = await handler(request());
    // Today: 204, and the event counts as handled, so the sender never retries what the handler refused.
    expect(first.status).not.toBe(204);
    const retry = await handler(request());
    expect([retry.status, retry.headers.get("webhook-duplicate")]).toEqual([204, null]);
    expect(runs).toBe(2);
  });
});

describe("Lambda: a proxy result whose statusCode is not a whole number is not swallowed into 204-and-done", () => {
  // AWS's own blueprints build `statusCode: err ? "400" : "200"`: string status codes are common.
  it.each<[string, unknown]>([
    ["a string statusCode", "503"],
    ["a fractional statusCode", 503.5],
  ])("%s", async (_name, statusCode) => {
    let runs = 0;
    const handler = lambdaHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: quiet,
      onEvent: () => {
        runs++;
        return runs === 1 ? { statusCode, body: "busy" } : undefined;
      },
    });
    const d = delivery();
    const event = { httpMethod: "POST", headers: d.headers, body: d.body };
    const context = { awsRequestId: "r", getRemainingTimeInMillis: () => 30_000 };
    const first = await handler(event, context);
    // Today: { statusCode: 204, body: "" }: the handler's result is dropped and the event marked done.
    expect(Number(first.statusCode)).not.toBe(204);
    const retry = await handler(event, context);
    expect([retry.statusCode, retry.headers?.["webhook-duplicate"]]).toEqual([204, undefined]);
    expect(runs).toBe(2);
  });
});

describe("Lambda: a proxy result API Gateway cannot read is not passed on as a 2xx that marks the event done", () => {
  it("a body that is an object, not a string (API Gateway answers 502 Malformed Lambda proxy response)", async () => {
    let runs = 0;
    const handler = lambdaHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: quiet,
      onEvent: () => {
        runs++;
        return { statusCode: 200, body: { ok: true } };
      },
    });
    const d = delivery();
    const event = { httpMethod: "POST", headers: d.headers, body: d.body };
    const context = { awsRequestId: "r", getRemainingTimeInMillis: () => 30_000 };
    const first = await handler(event, context);
    // Either the result is made well-formed (a string body), or the delivery fails and is released:
    // what must not happen is a 502 at API Gateway for an id already marked done (the case before the fix).
    expect(typeof first.body).toBe("string");
    const retry = await handler(event, context);
    if (first.statusCode >= 200 && first.statusCode <= 299) {
      expect([retry.statusCode, runs]).toEqual([204, 1]);
    } else {
      expect(runs).toBe(2);
    }
  });
});

describe("a reply that cannot be written releases the claim and answers our JSON 500", () => {
  it("fetch: a reply body JSON cannot serialise (a BigInt) is 500 handler_error, and the retry runs, not 409 for a lease", async () => {
    let runs = 0;
    const errors: unknown[] = [];
    const handler = webhookHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: (error) => errors.push(error),
      onEvent: () => {
        runs++;
        return runs === 1 ? { status: 200, body: { count: 1n } } : undefined;
      },
    });
    const d = delivery();
    const request = () =>
      new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers });
    // Today: handle() rejects with the TypeError (the runtime answers its own 500) and the claim
    // is never settled: every retry gets 409 for the whole inFlightTtl (60 s).
    const first = await handler(request()).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(Response);
    expect((first as Response).status).toBe(500);
    expect(((await (first as Response).json()) as { error: { code: string } }).error.code).toBe("handler_error");
    expect(errors).toHaveLength(1);
    const retry = await handler(request());
    expect(retry.status).toBe(204);
    expect(runs).toBe(2);
  });

  it("Lambda: the same reply body does not throw out of the handler", async () => {
    let runs = 0;
    const handler = lambdaHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: quiet,
      onEvent: () => {
        runs++;
        return runs === 1 ? { status: 200, body: { count: 1n } } : undefined;
      },
    });
    const d = delivery();
    const event = { httpMethod: "POST", headers: d.headers, body: d.body };
    const context = { awsRequestId: "r", getRemainingTimeInMillis: () => 30_000 };
    const first = await handler(event, context).catch((error: unknown) => error);
    expect((first as { statusCode?: number }).statusCode).toBe(500);
    expect((await handler(event, context)).statusCode).toBe(204);
    expect(runs).toBe(2);
  });

  let server: Server | undefined;
  afterEach(async () => {
    await close(server);
    server = undefined;
  });

  it.each<[string, Record<string, string>]>([
    ["a header name Node refuses", { "bad name": "x" }],
    ["a header value with a newline", { "x-note": "a\nb" }],
  ])("Express: a reply with %s is not marked done while the sender gets a 500", async (_name, headers) => {
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware({
        secret: SECRET,
        dedupe: dedupe(),
        onError: quiet,
        onEvent: () => {
          runs++;
          return runs === 1 ? { status: 200, headers } : undefined;
        },
      }),
    );
    // Express's own error handler would print the TypeError's stack: answer it quietly instead.
    app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).end();
    });
    server = await listen(createServer(app));
    const { port } = server.address() as { port: number };
    const d = delivery();
    const post = () => fetch(`http://127.0.0.1:${port}/webhooks`, { method: "POST", body: d.body, headers: d.headers });
    const first = await post();
    await first.arrayBuffer();
    // The sender saw no 2xx, so it retries: that retry must run the handler, not be a duplicate.
    expect(first.status).toBe(500);
    const retry = await post();
    await retry.arrayBuffer();
    expect([retry.status, retry.headers.get("webhook-duplicate")]).toEqual([204, null]);
    expect(runs).toBe(2);
  });
});

describe("another adapter's answer returned where it is not answered is a handler failure, not a 204", () => {
  const TYPE_ERROR = new TypeError(
    "flag-webhooks: onEvent returned a Response or a Lambda result, which this adapter does not answer with; return { status } instead",
  );
  let server: Server | undefined;
  afterEach(async () => {
    if (server) await close(server);
    server = undefined;
  });

  it.each<[string, () => unknown]>([
    ["a Lambda result", () => ({ statusCode: 503, body: "" })],
    ["a fetch Response", () => new Response(null, { status: 503 })],
  ])("Express, %s: 500, reported, and the retry runs the handler again", async (_name, make) => {
    const errors: unknown[] = [];
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware({
        secret: SECRET,
        dedupe: dedupe(),
        onError: (error) => void errors.push(error),
        onEvent: () => (++runs === 1 ? make() : undefined),
      }),
    );
    server = await listen(createServer(app));
    const { port } = server.address() as { port: number };
    const d = delivery();
    const post = () => fetch(`http://127.0.0.1:${port}/webhooks`, { method: "POST", body: d.body, headers: d.headers });
    const first = await post();
    expect([first.status, ((await first.json()) as { error: { code: string } }).error.code]).toEqual([
      500,
      "handler_error",
    ]);
    expect(errors).toEqual([TYPE_ERROR]);
    expect((await post()).status).toBe(204);
    expect(runs).toBe(2);
  });

  it("fetch, a Lambda result: 500; Lambda, a fetch Response: 500", async () => {
    const d = delivery();
    const errors: unknown[] = [];
    const fetchAnswer = await webhookHandler({
      secret: SECRET,
      onError: (error) => void errors.push(error),
      onEvent: () => ({ statusCode: 200 }),
    })(new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers }));
    expect(fetchAnswer.status).toBe(500);
    const lambdaAnswer = await lambdaHandler({
      secret: SECRET,
      onError: (error) => void errors.push(error),
      onEvent: () => new Response(null, { status: 200 }),
    })({ httpMethod: "POST", headers: d.headers, body: d.body } as never, {} as never);
    expect(lambdaAnswer.statusCode).toBe(500);
    expect(errors).toEqual([TYPE_ERROR, TYPE_ERROR]);
  });

  it("a reply with both status and statusCode is a WebhookReply, answered by its status", async () => {
    const d = delivery();
    const answer = await webhookHandler({ secret: SECRET, onEvent: () => ({ status: 202, statusCode: 500 }) })(
      new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers }),
    );
    expect(answer.status).toBe(202);
  });
});
