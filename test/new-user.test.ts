import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import { bodyParser } from "@koa/bodyparser";
import express from "express";
import { verifyEvent, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware, keepRawBody } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import Koa from "koa";
import { koaBody } from "koa-body";
import supertest from "supertest";
import { describe, expect, it } from "vitest";
import { vector } from "./support/vectors.js";

// Issue 7, part 2: the rough edges a new user hit in real apps, each through the public API.

const { secret, body, signature } = vector("flag-updated-compact");
const sign = (bytes: Buffer) => createHmac("sha256", secret).update(bytes).digest("hex");
/** The compact vector padded with JSON whitespace to `size` bytes: a valid, signed event. */
function padded(size: number): Buffer {
  return Buffer.concat([body.subarray(0, -1), Buffer.alloc(size - body.length, " "), body.subarray(-1)]);
}

describe("a parsed object passed as payload", () => {
  it("names the fix for each common framework", async () => {
    const call = verifyEvent({ secret: "s", payload: { a: 1 } as never, signature: "x" });
    await expect(call).rejects.toThrow(TypeError);
    await expect(call).rejects.toThrow(/express\.raw\(\{ type: "\*\/\*" \}\)/);
    await expect(call).rejects.toThrow(/mount flag-webhooks\/koa before the body parser/);
    await expect(call).rejects.toThrow(/request\.text\(\) or request\.arrayBuffer\(\)/);
    await expect(call).rejects.toThrow(/NestFactory\.create\(AppModule, \{ rawBody: true \}\)/);
  });

  it("tells a NestJS user without rawBody: true what to turn on", async () => {
    const call = verifyEvent({ secret: "s", payload: undefined as never, signature: "x" });
    await expect(call).rejects.toThrow(/got undefined\. No raw body was kept: in NestJS, create the app with/);
  });
});

describe("body_already_parsed names each adapter's own fix", () => {
  it("in a fetch handler whose body was read (c.req.json() in Hono)", async () => {
    const handler = webhookHandler({ secret, onEvent: () => {} });
    const request = new Request("http://localhost/", {
      method: "POST",
      body: body.toString(),
      headers: { "service-signature": signature },
    });
    await request.json();
    const response = await handler(request);
    const { error } = await response.json();
    expect([response.status, error.code]).toEqual([500, "body_already_parsed"]);
    expect(error.message).toMatch(/c\.req\.json\(\) in Hono/);
    expect(error.message).toMatch(/request\.clone\(\)/);
    expect(error.message).not.toMatch(/express/);
  });
});

describe("express.json({ verify: keepRawBody })", () => {
  function app(jsonOptions: Parameters<typeof express.json>[0]) {
    const application = express();
    application.use(express.json(jsonOptions));
    application.post("/webhooks", expressMiddleware({ secret }), (req, res) => {
      res.json({ type: req.webhookEvent?.type, parsed: typeof req.body });
    });
    return application;
  }

  it("keeps the raw bytes, so a route behind a global JSON parser verifies", async () => {
    const res = await supertest(app({ verify: keepRawBody }))
      .post("/webhooks")
      .set("content-type", "application/json")
      .set("service-signature", signature)
      .send(body.toString());
    expect([res.status, res.body]).toEqual([200, { type: "flag.updated", parsed: "object" }]);
  });

  it("hits body-parser's own 100 KiB limit first unless the parser's limit is raised (as the README says)", async () => {
    const big = padded(200 * 1024);
    const send = (application: express.Express) =>
      supertest(application)
        .post("/webhooks")
        .set("content-type", "application/json")
        .set("service-signature", sign(big))
        .send(big.toString());
    const refused = await send(app({ verify: keepRawBody }));
    expect(refused.status).toBe(413);
    expect(refused.headers["content-type"]).toMatch(/text\/html/); // body-parser's answer, not ours
    const accepted = await send(app({ verify: keepRawBody, limit: "1mb" }));
    expect([accepted.status, accepted.body.type]).toEqual([200, "flag.updated"]);
  });
});

describe("Koa body parsers keep decoded text, not bytes", () => {
  // A correctly signed body that starts with a UTF-8 byte order mark: only the bytes verify.
  const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
  const bomSignature = sign(withBom);

  function server(parser: Koa.Middleware, before: boolean) {
    const app = new Koa<WebhookState>();
    if (before) {
      // Ours first, answering itself, so the parser (there for the app's other routes) never
      // runs on a delivery whose stream we read.
      app.use(koaMiddleware({ secret, onEvent: (event) => ({ status: 200, body: { type: event.type } }) }));
      app.use(parser);
    } else {
      app.use(parser);
      app.use(koaMiddleware({ secret }));
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
    const res = await post(server(bodyParser(), true), withBom, bomSignature);
    // The bytes verify, and the event parses (UTF-8 decoding drops the BOM).
    expect([res.status, res.body.type]).toEqual([200, "flag.updated"]);
  });

  it("refuses the same body as 401 behind @koa/bodyparser, whose rawBody lost the BOM", async () => {
    const res = await post(server(bodyParser(), false), withBom, bomSignature);
    expect([res.status, res.body.error?.code]).toEqual([401, "invalid_signature"]);
  });

  it("verifies ordinary bodies from koa-body's includeUnparsed text, but it is decoded text as well", async () => {
    const ok = await post(server(koaBody({ includeUnparsed: true }), false), body, signature);
    expect([ok.status, ok.body.type]).toEqual([200, "flag.updated"]);
    const bom = await post(server(koaBody({ includeUnparsed: true }), false), withBom, bomSignature);
    expect([bom.status, bom.body.error?.code]).toEqual([401, "invalid_signature"]);
  });
});
