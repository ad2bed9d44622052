import express from "express";
import { WebhookError } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import Koa from "koa";
import supertest from "supertest";
import { describe, expect, it } from "vitest";
import { vector } from "./support/vectors.js";

// A handler that cannot take the event now (its queue is down) throws a WebhookError to choose
// the answer: every adapter sends that error's status, never 2xx and never a generic 500.
const { secret, body, signature } = vector("flag-updated-compact");
const unavailable = () => {
  throw new WebhookError("store_unavailable", "the queue is unavailable; retry later");
};
const quiet = () => {};

describe("a WebhookError thrown by onEvent", () => {
  it("is answered with its own status on the fetch handler", async () => {
    const handler = webhookHandler({ secret, onEvent: unavailable, onError: quiet });
    const request = new Request("https://example.test/webhooks", {
      method: "POST",
      headers: { "service-signature": signature },
      body: new Uint8Array(body),
    });
    const response = await handler(request);
    expect([response.status, response.headers.get("retry-after")]).toEqual([503, "10"]);
    expect(await response.json()).toEqual({
      error: { code: "store_unavailable", message: "the queue is unavailable; retry later" },
    });
  });

  it("is answered with its own status by the Express middleware", async () => {
    const app = express().post("/webhooks", expressMiddleware({ secret, onEvent: unavailable, onError: quiet }));
    const response = await supertest(app).post("/webhooks").set("service-signature", signature).send(body);
    expect([response.status, response.body.error.code]).toEqual([503, "store_unavailable"]);
  });

  it("is answered with its own status by the Koa middleware", async () => {
    const app = new Koa().use(koaMiddleware({ secret, onEvent: unavailable, onError: quiet }));
    const response = await supertest(app.callback()).post("/").set("service-signature", signature).send(body);
    expect([response.status, response.body.error.code]).toEqual([503, "store_unavailable"]);
  });

  it("still hides any other error behind 500 handler_error", async () => {
    const handler = webhookHandler({
      secret,
      onEvent: () => {
        throw new Error("db password=hunter2 refused");
      },
      onError: quiet,
    });
    const response = await handler(
      new Request("https://example.test/webhooks", {
        method: "POST",
        headers: { "service-signature": signature },
        body: new Uint8Array(body),
      }),
    );
    expect([response.status, (await response.json()).error.code]).toEqual([500, "handler_error"]);
  });
});
