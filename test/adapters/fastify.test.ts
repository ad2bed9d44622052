import { connect } from "node:net";
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from "fastify";
import { createRouter, MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { type FastifyWebhookOptions, webhookPlugin } from "flag-webhooks/fastify";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../examples/fastify.js";
import { delivery, signatureOf } from "../support/deliveries.js";
import { post } from "../support/http.js";
import { vector } from "../support/vectors.js";

// The Fastify plugin as a user registers it, in a real Fastify 5 app listening on loopback, next
// to routes that keep Fastify's own parsers: which errors it answers itself, the webhookEvent
// decorator, onEvent answering with reply.send(), and reply.hijack(). The shared case table runs
// in conformance.test.ts.
const { secret, body, signature } = vector("flag-updated-compact");
const event = JSON.parse(body.toString()) as { id: string; createdAt: string };
const sign = (bytes: Uint8Array | string) => signatureOf(secret, bytes);

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A Fastify app with JSON and text routes beside the webhook plugin; listening on 127.0.0.1:0. */
async function start(
  options: Partial<FastifyWebhookOptions> = {},
  setup: (instance: FastifyInstance) => void | Promise<void> = () => {},
  fastifyOptions: FastifyServerOptions = {},
): Promise<string> {
  const instance = Fastify(fastifyOptions);
  app = instance;
  instance.post("/json", async (request) => ({ parsed: request.body }));
  instance.post("/text", async (request) => ({ text: request.body }));
  await setup(instance);
  await instance.register(webhookPlugin, {
    path: "/webhooks",
    secret,
    onEvent: (received) => ({ status: 200, body: { type: received.type, id: received.id } }),
    ...options,
  });
  return instance.listen({ port: 0, host: "127.0.0.1" });
}

async function deliver(base: string, payload: Uint8Array | string = body, headers: Record<string, string> = {}) {
  return fetch(`${base}/webhooks`, {
    method: "POST",
    headers: { "service-signature": await sign(payload), ...headers },
    body: typeof payload === "string" ? payload : new Uint8Array(payload),
  });
}

const SECRET = "fastify-secret";

/** A fresh signed delivery POSTed to the webhook route: its status and text. */
async function deliverFresh(base: string, headers: Record<string, string> = {}) {
  const d = await delivery(SECRET);
  const answer = await post(`${base}/webhooks`, { body: d.body, headers: { ...d.headers, ...headers } });
  return { status: answer.status, text: answer.text };
}

describe("Fastify webhookPlugin", () => {
  it("leaves the app's JSON and text parsers to every other route", async () => {
    const base = await start();
    const json = await fetch(`${base}/json`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"a":[1,2]}',
    });
    expect(await json.json()).toEqual({ parsed: { a: [1, 2] } });
    const text = await fetch(`${base}/text`, { method: "POST", headers: { "content-type": "text/plain" }, body: "hi" });
    expect(await text.json()).toEqual({ text: "hi" });
    // Fastify's usual refusal of a type it has no parser for: our catch-all parser did not leak.
    const octets = await fetch(`${base}/json`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: "x",
    });
    expect(octets.status).toBe(415);
    // And the webhook route, in the same app, reads JSON bodies as raw bytes.
    const hook = await deliver(base, body, { "content-type": "application/json" });
    expect([hook.status, await hook.json()]).toEqual([200, { type: "flag.updated", id: event.id }]);
  });

  it("answers 204 when onEvent returns nothing, and hands onEvent the request and reply", async () => {
    const seen: unknown[] = [];
    const base = await start({
      onEvent(received, request, reply) {
        seen.push(received.type, request.url, request.webhookEvent === received, typeof reply.send);
      },
    });
    const res = await deliver(base);
    expect([res.status, await res.text()]).toEqual([204, ""]);
    expect(seen).toEqual(["flag.updated", "/webhooks", true, "function"]);
  });

  it("sends what onEvent sent with reply.send itself", async () => {
    const base = await start({ onEvent: (_event, _request, reply) => reply.code(202).send({ queued: true }) });
    const res = await deliver(base);
    expect([res.status, await res.json()]).toEqual([202, { queued: true }]);
  });

  it("takes a typed router as onEvent", async () => {
    const router = createRouter<[FastifyRequest, FastifyReply]>()
      .on("flag.updated", (updated, request) => ({
        status: 202,
        body: { flag: updated.data.flag, url: request.url },
      }))
      .on("flag.deleted", () => ({ status: 500 }));
    const base = await start({ onEvent: router });
    const res = await deliver(base);
    expect([res.status, await res.json()]).toEqual([202, { flag: "new-checkout", url: "/webhooks" }]);
  });

  it("puts the typed event on request.webhookEvent for hooks of the context it is registered in", async () => {
    const logged: (string | undefined)[] = [];
    app = Fastify();
    await app.register(async (scope) => {
      scope.addHook("onResponse", async (request) => {
        logged.push(request.webhookEvent?.type === "flag.updated" ? request.webhookEvent.data.flag : "none");
      });
      await scope.register(webhookPlugin, { path: "/webhooks", secret, onEvent: () => {} });
    });
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    expect((await deliver(base)).status).toBe(204);
    expect((await deliver(base, body, { "service-signature": "0".repeat(64) })).status).toBe(401);
    await vi.waitFor(() => expect(logged).toEqual(["new-checkout", "none"]));
  });

  it("answers 500 handler_error without the thrown message, and tells onError", async () => {
    const onError = vi.fn();
    const base = await start({
      onEvent: () => {
        throw new Error("database password is hunter2");
      },
      onError,
    });
    const res = await deliver(base);
    const text = await res.text();
    expect(res.status).toBe(500);
    expect(JSON.parse(text).error.code).toBe("handler_error");
    expect(text).not.toContain("hunter2");
    expect(onError).toHaveBeenCalledWith(
      expect.objectContaining({ message: "database password is hunter2" }),
      expect.anything(),
      expect.anything(),
    );
  });

  it("logs a failing onEvent through the app's own logger, as one JSON line, when no onError is given", async () => {
    const lines: string[] = [];
    const console_ = vi.spyOn(console, "error").mockImplementation(() => {});
    app = Fastify({ logger: { stream: { write: (line: string) => void lines.push(line) } } });
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret,
      onEvent: () => {
        throw new Error("database password is hunter2");
      },
    });
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    expect((await deliver(base)).status).toBe(500);
    const errors = lines.map((line) => JSON.parse(line)).filter((entry) => entry.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      msg: "flag-webhooks: onEvent, a hook or the dedupe store failed",
      err: { message: "database password is hunter2", type: "Error" },
      reqId: expect.any(String),
    });
    expect(console_).not.toHaveBeenCalled();
    console_.mockRestore();
  });

  it("verifies a delivery of any content type, a malformed one included, that Fastify would refuse with 415", async () => {
    const base = await start();
    for (const type of ["application/octet-stream", "application/x-www-form-urlencoded", "json", "text/"]) {
      const res = await deliver(base, body, { "content-type": type });
      expect([type, res.status]).toEqual([type, 200]);
    }
    const forged = await deliver(base, body, { "content-type": "json", "service-signature": "0".repeat(64) });
    expect([forged.status, (await forged.json()).error.code]).toEqual([401, "invalid_signature"]);
  });

  it("enforces its own limit, not Fastify's bodyLimit, with our 413", async () => {
    const padded = (size: number) => Buffer.concat([body, Buffer.alloc(size - body.length, " ")]);
    // Fastify's bodyLimit (100 bytes here) does not apply to the webhook route; our limit does.
    const base = await start({ limit: 2048 }, () => {}, { bodyLimit: 100 });
    expect((await deliver(base, padded(2048))).status).toBe(200);
    const res = await deliver(base, padded(2049));
    expect(res.status).toBe(413);
    expect(res.headers.get("connection")).toBe("close");
    expect(await res.json()).toEqual({
      error: { code: "payload_too_large", message: "body is larger than the limit of 2048 bytes" },
    });
    // The app's own routes keep Fastify's bodyLimit and its format.
    const json = await fetch(`${base}/json`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ pad: "x".repeat(200) }),
    });
    expect([json.status, (await json.json()).code]).toEqual([413, "FST_ERR_CTP_BODY_TOO_LARGE"]);
  });

  it("answers 405 with Allow: POST to other methods on its path", async () => {
    const base = await start();
    for (const method of ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "QUERY"]) {
      const res = await fetch(`${base}/webhooks`, { method });
      expect([method, res.status, res.headers.get("allow"), (await res.json()).error.code]).toEqual([
        method,
        405,
        "POST",
        "method_not_allowed",
      ]);
    }
  });

  it("refuses events older than maxAge with event_expired", async () => {
    const created = Date.parse(event.createdAt);
    let now = created + 60_000;
    const base = await start({ maxAge: "5m", now: () => now });
    expect((await deliver(base)).status).toBe(200);
    now = created + 6 * 60_000;
    const res = await deliver(base);
    expect([res.status, (await res.json()).error.code]).toEqual([401, "event_expired"]);
  });

  it("handles each event id once with dedupe; a failed handler's retry runs again", async () => {
    let calls = 0;
    let fail = true;
    const base = await start({
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent() {
        calls++;
        if (fail) throw new Error("down");
      },
      onError: () => {},
    });
    expect((await deliver(base)).status).toBe(500);
    fail = false;
    expect((await deliver(base)).status).toBe(204);
    const duplicate = await deliver(base);
    expect([duplicate.status, duplicate.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    expect(calls).toBe(2);
  });

  it("answers 408 body_timeout to a body that stops arriving, and closes the connection", async () => {
    const base = await start({ bodyTimeout: 200 });
    const { port } = new URL(base);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write(
          `POST /webhooks HTTP/1.1\r\nHost: x\r\nService-Signature: ${signature}\r\nContent-Length: 1000\r\n\r\n{"id":`,
        );
      });
      let text = "";
      socket.on("data", (d) => {
        text += d;
      });
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1.1 408/);
    expect(answer.toLowerCase()).toContain("connection: close");
    expect(answer).toContain(
      '{"error":{"code":"body_timeout","message":"the request body did not arrive within 200 ms"}}',
    );
  });

  it("explains body_already_parsed in Fastify's terms when a hook consumed request.raw first", async () => {
    const base = await start({}, (instance) => {
      // What a raw-body plugin does: read the payload in preParsing and hand Fastify a copy.
      instance.addHook("preParsing", async (_request, _reply, payload) => {
        const chunks: Buffer[] = [];
        for await (const chunk of payload) chunks.push(chunk as Buffer);
        return Readable.from(chunks);
      });
    });
    const res = await deliver(base);
    const { error } = await res.json();
    expect([res.status, error.code]).toEqual([500, "body_already_parsed"]);
    expect(error.message).toMatch(/^the request stream \(request\.raw\) was already parsed/);
    expect(error.message).toMatch(/request\.raw before webhookPlugin.*preParsing hooks.*request\.rawBody/);
    expect(error.message).not.toMatch(/express\.json\(\) or|express\.raw/);
  });

  it("uses request.rawBody when a raw-body plugin kept the bytes (fastify-raw-body with global: true)", async () => {
    const base = await start({}, (instance) => {
      instance.addHook("preParsing", async (request, _reply, payload) => {
        const chunks: Buffer[] = [];
        for await (const chunk of payload) chunks.push(chunk as Buffer);
        (request as { rawBody?: Buffer }).rawBody = Buffer.concat(chunks);
        return Readable.from(chunks);
      });
    });
    expect((await deliver(base)).status).toBe(200);
    const tampered = await deliver(base, Buffer.from(`${body} `), { "service-signature": signature });
    expect(tampered.status).toBe(401);
  });

  it("leaves errors of the app's own hooks on its route to the app's error handler", async () => {
    const base = await start({}, (instance) => {
      instance.setErrorHandler((error: Error, _request, reply) => reply.code(418).send({ app: error.message }));
      instance.addHook("onRequest", async (request) => {
        if (request.headers["x-blocked"]) throw new Error("blocked by the app");
      });
    });
    const res = await deliver(base, body, { "x-blocked": "1" });
    expect([res.status, await res.json()]).toEqual([418, { app: "blocked by the app" }]);
    expect((await deliver(base)).status).toBe(200);
  });

  it("checks its options when the app boots", async () => {
    const boot = async (options: unknown) => {
      const instance = Fastify();
      try {
        await instance.register(webhookPlugin, options as FastifyWebhookOptions);
        await instance.ready();
      } finally {
        await instance.close();
      }
    };
    const onEvent = () => {};
    await expect(boot({ path: "/webhooks", secret: "", onEvent })).rejects.toThrow(/"secret"/);
    await expect(boot({ path: "/webhooks", secret, onEvent, limit: "lots" })).rejects.toThrow(/"limit"/);
    await expect(boot({ path: "/webhooks", secret })).rejects.toThrow(/"onEvent"/);
    await expect(boot({ secret, onEvent })).rejects.toThrow(/"path"/);
  });

  it("registers under a prefix, and twice in one app with different secrets", async () => {
    const types: string[] = [];
    app = Fastify();
    await app.register(webhookPlugin, {
      prefix: "/hooks",
      path: "/flags",
      secret,
      onEvent: (e: WebhookEvent) => void types.push(`a:${e.type}`),
    });
    await app.register(webhookPlugin, {
      path: "/other",
      secret: "another-secret",
      onEvent: (e: WebhookEvent) => void types.push(`b:${e.type}`),
    });
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    const post = (path: string) =>
      fetch(`${base}${path}`, {
        method: "POST",
        headers: { "service-signature": signature },
        body: new Uint8Array(body),
      });
    expect((await post("/hooks/flags")).status).toBe(204);
    expect((await post("/other")).status).toBe(401);
    expect(types).toEqual(["a:flag.updated"]);
  });

  it("answers the same through app.inject()", async () => {
    app = Fastify();
    await app.register(webhookPlugin, { path: "/webhooks", secret, onEvent: () => ({ status: 202 }) });
    const ok = await app.inject({
      method: "POST",
      url: "/webhooks",
      headers: { "service-signature": signature },
      body,
    });
    expect(ok.statusCode).toBe(202);
    const bad = await app.inject({
      method: "POST",
      url: "/webhooks",
      headers: { "service-signature": signature, "content-type": "application/json" },
      payload: `${body} `,
    });
    expect([bad.statusCode, bad.json().error.code]).toEqual([401, "invalid_signature"]);
  });

  it("examples/fastify.ts routes a signed delivery and keeps JSON for its other route", async () => {
    app = await createApp(secret);
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    const res = await deliver(base);
    expect([res.status, await res.json()]).toEqual([
      200,
      { received: event.id, summary: "dana@example.com changed new-checkout in production (on: false → true)" },
    ]);
    const tampered = await deliver(base, Buffer.from(`${body} `), { "service-signature": signature });
    expect(tampered.status).toBe(401);
    const echo = await fetch(`${base}/api/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"ok":true}',
    });
    expect(await echo.json()).toEqual({ echo: { ok: true } });
  });
});

describe("Fastify webhookPlugin: errors, the decorator, and reply.send()", () => {
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
      expect(await deliverFresh(base, { "x-code": code })).toEqual({
        status: 418,
        text: JSON.stringify({ app: code }),
      });
    }
    expect((await deliverFresh(base)).status).toBe(204);
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
    expect(await deliverFresh(base)).toEqual({ status: 200, text: JSON.stringify({ same: true }) });
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
    expect((await deliverFresh(base)).status).toBe(204);
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
    expect(await deliverFresh(base)).toEqual({ status: 202, text: "sent by onEvent" });
    await new Promise((done) => setTimeout(done, 20));
    expect(lines.filter((line) => line.level >= 40).map((line) => line.msg)).toEqual([]);
  });
});

describe("Fastify: reply.hijack(), answered later on reply.raw", () => {
  it("the claim stands until that answer (a copy meanwhile gets 409), and its 503 releases it", async () => {
    let runs = 0;
    let running = 0;
    let most = 0;
    const instance = Fastify();
    app = instance;
    await instance.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
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
    const base = await instance.listen({ port: 0, host: "127.0.0.1" });
    const d = await delivery(SECRET);
    const first = post(`${base}/webhooks`, d);
    await sleep(100);
    // Not marked done at hijack(), with Fastify's default 200, before the handler finished (its
    // 503 would then never release it, and the event would be lost).
    const copy = await post(`${base}/webhooks`, d);
    expect(copy.status).toBe(409);
    expect((await first).status).toBe(503);
    expect(await post(`${base}/webhooks`, d)).toMatchObject({ status: 204, duplicate: null });
    expect([runs, most]).toEqual([2, 1]);
  });
});
