import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer, serve } from "@hono/node-server";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { type WebhookEnv, webhookMiddleware } from "flag-webhooks/hono";
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { close, post as postTo, serverPerTest } from "../support/http.js";
import { vector } from "../support/vectors.js";

// Hono-specific edges: in a real Hono app on @hono/node-server over real HTTP, and with real
// Request objects through app.fetch. The shared case table runs against Hono in
// conformance.test.ts (Node) and test/runtimes/ (Bun, Deno, workerd).

const { secret, body, signature } = vector("flag-updated-compact");
// Still JSON, so a c.req.json() before the middleware does not throw first.
const tampered = Buffer.from(body.toString().replace("dana@", "mall@"));
const errorOf = async (response: Response) =>
  ((await response.json()) as { error: { code: string; message: string } }).error;

const SECRET = "hono-secret";
const serveHere = serverPerTest();

/** Counts the runs of each route, to see whether a retry ran it again. */
function counter() {
  const runs: Record<string, number> = {};
  return { runs, count: (route: string) => (runs[route] = (runs[route] ?? 0) + 1) };
}
const { runs, count } = counter();
const seen: WebhookEvent[] = [];

function app(): Hono {
  const app = new Hono();
  const dedupe = () => ({ store: new MemoryDedupeStore(), ttl: "1h" });

  app.post("/next", webhookMiddleware({ secret }), async (c) => {
    // The middleware read the body; the handler can still read it through Hono.
    const parsed = await c.req.json();
    return c.json({ type: c.var.webhookEvent.type, sameId: parsed.id === c.get("webhookEvent").id });
  });
  app.post(
    "/read-first/text",
    async (c, next) => {
      await c.req.text();
      await next();
    },
    webhookMiddleware({ secret }),
    (c) => c.json({ type: c.var.webhookEvent.type }),
  );
  app.post(
    "/read-first/json",
    async (c, next) => {
      await c.req.json();
      await next();
    },
    webhookMiddleware({ secret }),
    (c) => c.json({ type: c.var.webhookEvent.type }),
  );
  app.post(
    "/read-first/arraybuffer",
    async (c, next) => {
      await c.req.arrayBuffer();
      await next();
    },
    webhookMiddleware({ secret, limit: body.length }),
    (c) => c.json({ type: c.var.webhookEvent.type }),
  );
  app.post(
    "/read-first/blob",
    async (c, next) => {
      await c.req.blob();
      await next();
    },
    webhookMiddleware({ secret }),
    (c) => c.json({ type: c.var.webhookEvent.type }),
  );
  app.post(
    "/read-first/raw",
    async (c, next) => {
      await c.req.raw.text();
      await next();
    },
    webhookMiddleware({ secret }),
    (c) => c.body(null, 204),
  );
  app.post("/on-event/none", webhookMiddleware({ secret, onEvent: (event) => void seen.push(event) }));
  app.post("/on-event/reply", webhookMiddleware({ secret, onEvent: () => ({ status: 202, body: { queued: true } }) }));
  app.post(
    "/on-event/response",
    webhookMiddleware({ secret, onEvent: (event, c) => c.text(`got ${event.type}`, 200, { "x-own": "yes" }) }),
  );
  app.post(
    "/on-event/throws",
    webhookMiddleware({
      secret,
      onError() {},
      onEvent() {
        throw new Error("secret internals");
      },
    }),
  );
  app.post("/dedupe/ok", webhookMiddleware({ secret, dedupe: dedupe() }), (c) => {
    count("ok");
    return c.body(null, 204);
  });
  app.post("/dedupe/5xx", webhookMiddleware({ secret, dedupe: dedupe() }), (c) =>
    count("5xx") === 1 ? c.text("down", 503) : c.body(null, 204),
  );
  app.post("/dedupe/throws", webhookMiddleware({ secret, dedupe: dedupe(), onError() {} }), (c) => {
    if (count("throws") === 1) throw new Error("boom");
    return c.body(null, 204);
  });
  app.post("/dedupe/throws-4xx", webhookMiddleware({ secret, dedupe: dedupe() }), (c) => {
    if (count("throws-4xx") === 1) throw new HTTPException(409, { message: "busy" });
    return c.body(null, 204);
  });
  app.post("/dedupe/throws-non-error", webhookMiddleware({ secret, dedupe: dedupe() }), (c) => {
    // Hono's compose hands only Error instances to app.onError: this one reaches the middleware.
    if (count("throws-non-error") === 1) throw "not an Error";
    return c.body(null, 204);
  });
  app.post("/dedupe/4xx", webhookMiddleware({ secret, dedupe: dedupe() }), (c) => {
    count("4xx");
    return c.json({ error: "unprocessable" }, 422);
  });
  app.post("/json", async (c) => c.json(await c.req.json()));
  // docs/hono.md's way to get our 405 for other methods: app.all instead of app.post.
  app.all("/all", webhookMiddleware({ secret }), (c) => c.body(null, 204));
  app.onError((error, c) => (error instanceof HTTPException ? error.getResponse() : c.text("application error", 500)));
  return app;
}

let server: Server;
let base: string;
beforeAll(async () => {
  server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app().fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => close(server));

const post = (path: string, payload: Uint8Array = body, sig = signature) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "service-signature": sig },
    body: new Uint8Array(payload),
  });

describe("Hono middleware without onEvent", () => {
  it("hands the route the typed event, and the route can still read the body with c.req.json()", async () => {
    const response = await post("/next");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: "flag.updated", sameId: true });
  });

  it("answers a refusal itself, in the error shape, without running the route", async () => {
    const response = await post("/next", tampered);
    expect(response.status).toBe(401);
    expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect((await errorOf(response)).code).toBe("invalid_signature");
  });

  it("leaves the app's other routes and their c.req.json() alone", async () => {
    const response = await fetch(`${base}/json`, { method: "POST", body: '{"a":1}' });
    expect(await response.json()).toEqual({ a: 1 });
  });
});

describe("Hono bodies read before the middleware", () => {
  it.each(["text", "json", "arraybuffer", "blob"])("verifies the body Hono cached for c.req.%s()", async (how) => {
    const response = await post(`/read-first/${how}`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: "flag.updated" });
  });

  it.each(["text", "json", "arraybuffer", "blob"])(
    "still refuses a tampered body Hono cached for c.req.%s()",
    async (how) => {
      const response = await post(`/read-first/${how}`, tampered);
      expect(response.status).toBe(401);
      expect((await errorOf(response)).code).toBe("invalid_signature");
    },
  );

  it("applies the limit to a cached body", async () => {
    const response = await post("/read-first/arraybuffer", Buffer.concat([body, Buffer.from(" ")]));
    expect(response.status).toBe(413);
    expect((await errorOf(response)).code).toBe("payload_too_large");
  });

  it("says how to fix it, in Hono's terms, when the raw body was read past Hono", async () => {
    const response = await post("/read-first/raw");
    expect(response.status).toBe(500);
    const error = await errorOf(response);
    expect(error.code).toBe("body_already_parsed");
    expect(error.message).toContain("call webhookMiddleware before c.req.json()");
    expect(error.message).not.toContain("express");
  });
});

describe("Hono middleware with onEvent", () => {
  it("answers 204 once onEvent resolved", async () => {
    const response = await post("/on-event/none");
    expect(response.status).toBe(204);
    expect(seen.at(-1)?.id).toBe("evt_01HZX3K9");
  });

  it("answers the { status } reply onEvent returns", async () => {
    const response = await post("/on-event/reply");
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ queued: true });
  });

  it("sends the Response onEvent returns as it is", async () => {
    const response = await post("/on-event/response");
    expect(response.status).toBe(200);
    expect(response.headers.get("x-own")).toBe("yes");
    expect(await response.text()).toBe("got flag.updated");
  });

  it("answers 500 handler_error without the thrown message", async () => {
    const response = await post("/on-event/throws");
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(JSON.parse(text).error.code).toBe("handler_error");
    expect(text).not.toContain("secret internals");
  });
});

describe("other methods than POST", () => {
  it("app.post leaves a GET to Hono (its plain-text 404); app.all answers our 405 with Allow: POST", async () => {
    const viaPost = await fetch(`${base}/next`);
    expect([viaPost.status, viaPost.headers.get("content-type")]).toEqual([404, "text/plain; charset=UTF-8"]);
    const viaAll = await fetch(`${base}/all`);
    expect([viaAll.status, viaAll.headers.get("allow"), (await errorOf(viaAll)).code]).toEqual([
      405,
      "POST",
      "method_not_allowed",
    ]);
    expect((await post("/all")).status).toBe(204);
  });
});

describe("Hono middleware and dedupe: the route's outcome settles the claim", () => {
  it("marks the id handled when the route answers 2xx: the next copy is a duplicate", async () => {
    expect((await post("/dedupe/ok")).status).toBe(204);
    const again = await post("/dedupe/ok");
    expect(again.status).toBe(204);
    expect(again.headers.get("webhook-duplicate")).toBe("true");
    expect(runs.ok).toBe(1);
  });

  it("releases the claim when the route answers 5xx, so the retry runs it", async () => {
    expect((await post("/dedupe/5xx")).status).toBe(503);
    expect((await post("/dedupe/5xx")).status).toBe(204);
    expect(runs["5xx"]).toBe(2);
  });

  it("releases the claim when the route throws (answered by app.onError), so the retry runs it", async () => {
    const failed = await post("/dedupe/throws");
    expect(failed.status).toBe(500);
    expect(await failed.text()).toBe("application error");
    expect((await post("/dedupe/throws")).status).toBe(204);
    expect(runs.throws).toBe(2);
  });

  it("releases the claim when the route throws an error answered below 500 (HTTPException 409)", async () => {
    expect((await post("/dedupe/throws-4xx")).status).toBe(409);
    expect((await post("/dedupe/throws-4xx")).status).toBe(204);
    expect(runs["throws-4xx"]).toBe(2);
  });

  it("releases the claim when the route throws something that is not an Error, and lets it through", async () => {
    expect((await post("/dedupe/throws-non-error")).status).toBe(500);
    expect((await post("/dedupe/throws-non-error")).status).toBe(204);
    expect(runs["throws-non-error"]).toBe(2);
  });

  it("releases the claim when the route answers 4xx: only a 2xx counts as handled", async () => {
    expect((await post("/dedupe/4xx")).status).toBe(422);
    expect((await post("/dedupe/4xx")).status).toBe(422);
    expect(runs["4xx"]).toBe(2);
  });
});

describe("Hono, the route after the middleware, returning no Response", () => {
  it("is answered 500 by Hono, so the claim is released and the retry runs the route", async () => {
    let runs = 0;
    const app = new Hono();
    app.onError((_error, c) => c.text("route failed", 500));
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }),
      (c) => {
        runs++;
        // The classic slip: `c.body(null, 204)` without `return` (the second time it is there).
        if (runs === 1) {
          c.body(null, 204);
          return undefined as unknown as Response;
        }
        return c.body(null, 204);
      },
    );
    const server = await serveHere(createAdaptorServer({ fetch: app.fetch }) as Server);
    const d = await delivery(SECRET);
    expect((await postTo(server, d)).status).toBe(500);
    // Not marked done with the placeholder 200 that reading c.res creates: the route reruns.
    expect(await postTo(server, d)).toMatchObject({ status: 204, duplicate: null });
    expect(runs).toBe(2);
  });
});

function request(d: { body: string | ReadableStream<Uint8Array>; headers: Record<string, string> }): Request {
  return new Request("http://localhost/webhooks", {
    method: "POST",
    body: d.body,
    headers: d.headers,
    duplex: "half",
  } as RequestInit);
}

describe("Hono middleware through app.fetch", () => {
  it("answers with the Response onEvent returns as it is: status, headers and body", async () => {
    const app = new Hono();
    app.post(
      "/webhooks",
      webhookMiddleware({
        secret: SECRET,
        onEvent: () => new Response("made by the app", { status: 201, headers: { "x-own": "yes" } }),
      }),
    );
    const response = await app.fetch(request(await delivery(SECRET)));
    expect([response.status, response.headers.get("x-own"), await response.text()]).toEqual([
      201,
      "yes",
      "made by the app",
    ]);
  });

  it("releases the claim when the route throws, even when app.onError answers it with a 2xx", async () => {
    let runs = 0;
    const app = new Hono<WebhookEnv>();
    app.onError((error, c) => c.text(`recovered: ${error.message}`, 200));
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (c) => {
        runs++;
        if (runs === 1) throw new Error("route failed");
        return c.text("second run");
      },
    );
    const d = await delivery(SECRET);
    const first = await app.fetch(request(d));
    expect([first.status, await first.text()]).toEqual([200, "recovered: route failed"]);
    const retry = await app.fetch(request(d));
    expect([retry.status, await retry.text(), runs]).toEqual([200, "second run", 2]);
  });

  it("lets an error of next() through, and releases the claim, when it is run by hand inside another middleware", async () => {
    let runs = 0;
    const errors: string[] = [];
    const app = new Hono();
    app.onError((error, c) => {
      errors.push(error.message);
      return c.text("failed", 500);
    });
    const verify = webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } });
    app.post("/webhooks", async (c) => {
      let response: Response | undefined;
      await verify(c as never, async () => {
        runs++;
        if (runs === 1) throw new Error("inner handler failed");
        response = c.text("second run");
      });
      return response ?? c.text("no answer", 500);
    });
    const d = await delivery(SECRET);
    expect((await app.fetch(request(d))).status).toBe(500);
    expect(errors).toEqual(["inner handler failed"]);
    const retry = await app.fetch(request(d));
    expect([retry.status, await retry.text(), runs]).toEqual([200, "second run", 2]);
  });

  it.each([
    ["at the start of a larger buffer", 0],
    ["in the middle of a larger buffer", 7],
  ])("leaves the routes exactly the body's bytes when the stream's one chunk is a view %s", async (_, offset) => {
    const d = await delivery(SECRET);
    const bytes = new TextEncoder().encode(d.body);
    const larger = new Uint8Array(offset + bytes.length + 9).fill(0x20);
    larger.set(bytes, offset);
    const chunk = larger.subarray(offset, offset + bytes.length);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk);
        controller.close();
      },
    });
    const app = new Hono<WebhookEnv>();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET }), async (c) =>
      c.json({ text: await c.req.text(), bytes: (await c.req.arrayBuffer()).byteLength }),
    );
    const response = await app.fetch(request({ body: stream, headers: d.headers }));
    expect(await response.json()).toEqual({ text: d.body, bytes: bytes.length });
  });
});
