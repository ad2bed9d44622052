import { Writable } from "node:stream";
import Fastify, { type FastifyInstance } from "fastify";
import { webhookPlugin } from "flag-webhooks/fastify";
import { afterEach, describe, expect, it } from "vitest";
import { signedDelivery } from "./support/signed-delivery.js";

// The Fastify plugin in a real Fastify 5 app over real HTTP: which errors it answers itself, an
// app that declared the webhookEvent decorator already, and onEvent answering with reply.send().
const SECRET = "mutation-fastify-secret";

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function deliver(base: string, headers: Record<string, string> = {}) {
  const d = signedDelivery(SECRET);
  const response = await fetch(`${base}/webhooks`, {
    method: "POST",
    body: d.body,
    headers: { ...d.headers, ...headers },
  });
  return { status: response.status, text: await response.text() };
}

describe("Fastify webhookPlugin", () => {
  it("answers only Fastify's own content-type errors itself: an app error whose code merely contains one goes to the app", async () => {
    const instance = Fastify();
    app = instance;
    instance.setErrorHandler((error: Error & { code?: string }, _request, reply) =>
      reply.code(418).send({ app: error.code }),
    );
    instance.addHook("onRequest", async (request) => {
      const code = request.headers["x-code"];
      if (typeof code === "string") throw Object.assign(new Error("the app's own"), { code });
    });
    await instance.register(webhookPlugin, { path: "/webhooks", secret: SECRET, onEvent() {} });
    const base = await instance.listen({ port: 0, host: "127.0.0.1" });
    for (const code of ["APP_FST_ERR_CTP_INVALID_MEDIA_TYPE", "FST_ERR_ROUTE_MISSING_CONTENT_TYPE_OF_APP"]) {
      expect(await deliver(base, { "x-code": code })).toEqual({ status: 418, text: JSON.stringify({ app: code }) });
    }
    expect((await deliver(base)).status).toBe(204);
  });

  it("registers in an app that declared the webhookEvent decorator itself, and requests of its route carry it", async () => {
    const instance = Fastify();
    app = instance;
    instance.decorateRequest("webhookEvent", undefined);
    const declared: boolean[] = [];
    instance.addHook("onRequest", async (request) => {
      declared.push("webhookEvent" in request);
    });
    await instance.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      onEvent: (event, request) => ({ status: 200, body: { same: request.webhookEvent === event } }),
    });
    const base = await instance.listen({ port: 0, host: "127.0.0.1" });
    expect(await deliver(base)).toEqual({ status: 200, text: JSON.stringify({ same: true }) });
    expect(declared).toEqual([true]);
  });

  it("declares the webhookEvent decorator on its own route's requests in an app that did not", async () => {
    const instance = Fastify();
    app = instance;
    const declared: boolean[] = [];
    instance.addHook("onRequest", async (request) => {
      declared.push("webhookEvent" in request);
    });
    instance.post("/other", async () => "other");
    await instance.register(webhookPlugin, { path: "/webhooks", secret: SECRET, onEvent() {} });
    const base = await instance.listen({ port: 0, host: "127.0.0.1" });
    expect((await deliver(base)).status).toBe(204);
    expect((await fetch(`${base}/other`, { method: "POST" })).status).toBe(200);
    expect(declared).toEqual([true, false]);
  });

  it("sends nothing more, and logs no error, when onEvent answered with reply.send() itself", async () => {
    const lines: { level: number; msg: string }[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    });
    const instance = Fastify({ logger: { level: "info", stream } });
    app = instance;
    await instance.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      onEvent: async (_event, _request, reply) => {
        await reply.code(202).header("x-own", "1").send("sent by onEvent");
      },
    });
    const base = await instance.listen({ port: 0, host: "127.0.0.1" });
    expect(await deliver(base)).toEqual({ status: 202, text: "sent by onEvent" });
    await new Promise((done) => setTimeout(done, 20));
    expect(lines.filter((line) => line.level >= 40).map((line) => line.msg)).toEqual([]);
  });
});
