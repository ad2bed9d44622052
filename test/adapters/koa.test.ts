import { bodyParser } from "@koa/bodyparser";
import { type WebhookState, webhookMiddleware } from "flag-webhooks/koa";
import Koa from "koa";
import supertest from "supertest";
import { describe, expect, it, vi } from "vitest";
import { vector } from "../support/vectors.js";

const { secret, body, signature } = vector("flag-updated-compact");
const pretty = vector("flag-updated-pretty");

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
    // Koa's own fix, not Express's (issue 7).
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
