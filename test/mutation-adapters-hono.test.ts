import { createHmac } from "node:crypto";
import { MemoryDedupeStore } from "flag-webhooks";
import { type WebhookEnv, webhookMiddleware } from "flag-webhooks/hono";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { signedDelivery } from "./support/signed-delivery.js";

// The Hono middleware with real Request objects through app.fetch: the Response onEvent returns,
// a route whose error app.onError answers with a 2xx, the middleware run by hand inside another
// one, and the bytes the routes after it read back from Hono's body cache.
const SECRET = "mutation-hono-secret";

function request(d: { body: string | ReadableStream<Uint8Array>; headers: Record<string, string> }): Request {
  return new Request("http://localhost/webhooks", {
    method: "POST",
    body: d.body,
    headers: d.headers,
    duplex: "half",
  } as RequestInit);
}

describe("Hono middleware", () => {
  it("answers with the Response onEvent returns as it is: status, headers and body", async () => {
    const app = new Hono();
    app.post(
      "/webhooks",
      webhookMiddleware({
        secret: SECRET,
        onEvent: () => new Response("made by the app", { status: 201, headers: { "x-own": "yes" } }),
      }),
    );
    const response = await app.fetch(request(signedDelivery(SECRET)));
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
    const d = signedDelivery(SECRET);
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
    const d = signedDelivery(SECRET);
    expect((await app.fetch(request(d))).status).toBe(500);
    expect(errors).toEqual(["inner handler failed"]);
    const retry = await app.fetch(request(d));
    expect([retry.status, await retry.text(), runs]).toEqual([200, "second run", 2]);
  });

  it.each([
    ["at the start of a larger buffer", 0],
    ["in the middle of a larger buffer", 7],
  ])("leaves the routes exactly the body's bytes when the stream's one chunk is a view %s", async (_, offset) => {
    const d = signedDelivery(SECRET);
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
    expect(d.headers["service-signature"]).toBe(createHmac("sha256", SECRET).update(d.body).digest("hex"));
  });
});
