import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { resolve } from "node:path";
import { build } from "esbuild";
import express from "express";
import { Miniflare } from "miniflare";
import supertest from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webhookMiddleware } from "../src/adapters/express.js";
import { webhookHandler } from "../src/adapters/fetch.js";
import { MemoryDedupeStore, parseEvent, type WebhookEvent, type WebhookEventType } from "../src/index.js";
import { createEvent, signedDelivery, signedRequest } from "../src/testing/index.js";
import { close, listen } from "./http.js";

const root = resolve(import.meta.dirname, "..");

// flag-webhooks/testing, used as a receiver's test suite would use it: real Express over real
// HTTP with supertest, real Request objects into the real fetch handler.
const secret = "test-secret";
const hmac = (body: string | Uint8Array) => createHmac("sha256", secret).update(body).digest("hex");
const TYPES: WebhookEventType[] = [
  "flag.updated",
  "flag.created",
  "flag.deleted",
  "rollout.step",
  "rollout.guard_triggered",
];

describe("createEvent", () => {
  it.each(TYPES)("makes a %s event that parseEvent accepts as it is", (type) => {
    const event = createEvent(type);
    expect(event.type).toBe(type);
    expect(parseEvent(JSON.stringify(event))).toEqual(event);
  });

  it("gives every event a fresh id", () => {
    const ids = new Set(Array.from({ length: 100 }, () => createEvent("flag.updated").id));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
  });

  it("stamps createdAt with the current time, in ISO 8601 UTC", () => {
    const before = Date.now();
    const { createdAt } = createEvent("rollout.step");
    const after = Date.now();
    expect(createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(createdAt)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(createdAt)).toBeLessThanOrEqual(after);
  });

  it("fills flag.updated with a flag, a change and an actor, in production", () => {
    const event = createEvent("flag.updated");
    expect(event.environment).toBe("production");
    expect(event.data).toEqual({
      flag: "new-checkout",
      changes: [{ path: "on", from: false, to: true }],
      actor: { type: "user", email: "dana@example.com" },
    });
  });

  it("merges nested overrides and keeps the fields they do not name", () => {
    const event = createEvent("flag.updated", {
      environment: "staging",
      data: { actor: { email: "ops@example.com" } },
    });
    expect(event.environment).toBe("staging");
    expect(event.data.flag).toBe("new-checkout");
    expect(event.data.changes).toEqual([{ path: "on", from: false, to: true }]);
    expect(event.data.actor).toEqual({ type: "user", email: "ops@example.com" });
  });

  it("replaces arrays and top-level values instead of merging them", () => {
    const changes = [
      { path: "rollout.percent", from: 10, to: 50 },
      { path: "tags", from: [], to: ["beta"] },
    ];
    const event = createEvent("flag.updated", {
      id: "evt_fixed",
      createdAt: "2026-01-01T00:00:00Z",
      data: { changes },
    });
    expect(event.id).toBe("evt_fixed");
    expect(event.createdAt).toBe("2026-01-01T00:00:00Z");
    expect(event.data.changes).toEqual(changes);
  });

  it("leaves a default alone for an override of undefined", () => {
    const event = createEvent("flag.updated", { environment: undefined, data: { flag: undefined } });
    expect([event.environment, event.data.flag]).toEqual(["production", "new-checkout"]);
  });

  it("adds fields to the undocumented data of other types", () => {
    const event = createEvent("rollout.step", { data: { percent: 25 } });
    expect(event.data).toEqual({ flag: "new-checkout", percent: 25 });
  });

  it("keeps an own __proto__ key from JSON as a field, never as a prototype", () => {
    const event = createEvent("flag.created", JSON.parse('{ "data": { "__proto__": { "polluted": true } } }'));
    expect(Object.getPrototypeOf(event.data)).toBe(Object.prototype);
    expect(Object.hasOwn(event.data, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("gives every event its own objects, so changing one changes no other", () => {
    const first = createEvent("flag.updated");
    first.data.changes.push({ path: "x", from: 1, to: 2 });
    first.data.actor.email = "changed@example.com";
    const second = createEvent("flag.updated");
    expect(second.data.changes).toHaveLength(1);
    expect(second.data.actor.email).toBe("dana@example.com");
  });

  it("refuses an event type it does not know, at run time too", () => {
    expect(() => createEvent("flag.archived" as WebhookEventType)).toThrow(
      new TypeError('flag-webhooks/testing: unknown event type "flag.archived"'),
    );
  });
});

describe("signedDelivery", () => {
  it("signs JSON.stringify(event) and returns it with the service's headers", async () => {
    const event = createEvent("flag.updated");
    const delivery = await signedDelivery({ secret, event });
    expect(delivery).toEqual({
      body: JSON.stringify(event),
      headers: { "content-type": "application/json", "service-signature": hmac(JSON.stringify(event)) },
    });
  });

  it("signs a body exactly as given, string or UTF-8 bytes", async () => {
    const body = '{\n  "pretty": "é"\n}\n';
    const fromString = await signedDelivery({ secret, body });
    const fromBytes = await signedDelivery({ secret, body: new TextEncoder().encode(body) });
    expect(fromString).toEqual({
      body,
      headers: { "content-type": "application/json", "service-signature": hmac(body) },
    });
    expect(fromBytes).toEqual(fromString);
  });

  it("keeps a byte-order mark, which is part of the signed bytes", async () => {
    const bytes = Uint8Array.of(0xef, 0xbb, 0xbf, 0x7b, 0x7d);
    const delivery = await signedDelivery({ secret, body: bytes });
    expect(new TextEncoder().encode(delivery.body)).toEqual(bytes);
    expect(delivery.headers["service-signature"]).toBe(hmac(bytes));
  });

  it("refuses bytes that are not UTF-8, pointing to signedRequest", async () => {
    await expect(signedDelivery({ secret, body: Uint8Array.of(0xff, 0xfe) })).rejects.toThrow(/use signedRequest/);
  });

  it.each([
    ["no event and no body", { secret }, /exactly one of "event" and "body"/],
    ["both an event and a body", { secret, event: {}, body: "{}" }, /exactly one of "event" and "body"/],
    ["an empty secret", { secret: "", body: "{}" }, /option "secret" must be a non-empty string/],
    ["a parsed object as the body", { secret, body: { id: 1 } }, /"body" must be a string or a Uint8Array/],
  ])("throws a TypeError for %s", async (_, options, message) => {
    await expect(signedDelivery(options as never)).rejects.toThrow(message);
    await expect(signedRequest(options as never)).rejects.toThrow(message);
  });
});

describe("signedDelivery with supertest", () => {
  let server: Server;
  let received: { body: Buffer; headers: IncomingMessage["headers"] } | undefined;
  beforeAll(async () => {
    server = await listen(
      createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (chunk: Buffer) => chunks.push(chunk));
        req.on("end", () => {
          received = { body: Buffer.concat(chunks), headers: req.headers };
          res.writeHead(204).end();
        });
      }),
    );
  });
  afterAll(() => close(server));

  // Not canonical JSON: indentation, a key order JSON.stringify would keep but spacing it would
  // not, a raw "é", an escaped "\u00e9" and an emoji. Any re-serialisation changes these bytes.
  const body = '{\n    "id": "evt_pretty",\n    "note": "caf\u00e9 \\u00e9 \u{1F680}",\n    "n": 1.0\n}\n';

  it("sends the body's bytes unchanged, so the signature still matches", async () => {
    const { headers, body: sent } = await signedDelivery({ secret, body });
    await supertest(server).post("/webhooks").set(headers).send(sent).expect(204);
    expect(received?.body.toString("utf8")).toBe(body);
    expect(received?.headers["service-signature"]).toBe(hmac(received?.body ?? ""));
    expect(received?.headers["content-type"]).toBe("application/json");
  });

  it("is right to return a string: supertest re-serialises a Buffer sent as JSON", async () => {
    const { headers } = await signedDelivery({ secret, body });
    await supertest(server).post("/webhooks").set(headers).send(Buffer.from(body)).expect(204);
    expect(received?.body.toString("utf8")).not.toBe(body);
    expect(received?.body.toString("utf8")).toMatch(/^\{"type":"Buffer","data":\[/);
  });

  it("passes an Express receiver, and a tampered copy is refused", async () => {
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret }), (req, res) => {
      res.json({ type: req.webhookEvent?.type, id: req.webhookEvent?.id });
    });
    const event = createEvent("flag.deleted");
    const delivery = await signedDelivery({ secret, event });
    const ok = await supertest(app).post("/webhooks").set(delivery.headers).send(delivery.body);
    expect([ok.status, ok.body]).toEqual([200, { type: "flag.deleted", id: event.id }]);
    const tampered = await supertest(app)
      .post("/webhooks")
      .set(delivery.headers)
      .send(delivery.body.replace("production", "productioN"));
    expect([tampered.status, tampered.body.error.code]).toEqual([401, "invalid_signature"]);
  });
});

describe("signedRequest", () => {
  it("builds a signed POST Request that the fetch handler accepts", async () => {
    const seen: WebhookEvent[] = [];
    const handler = webhookHandler({ secret, onEvent: (event) => void seen.push(event) });
    const event = createEvent("rollout.guard_triggered", { environment: "staging" });
    const request = await signedRequest({ secret, event });
    expect([request.method, request.url]).toEqual(["POST", "http://localhost/webhooks"]);
    expect(request.headers.get("content-type")).toBe("application/json");
    expect((await handler(request)).status).toBe(204);
    expect(seen).toEqual([event]);
  });

  it("takes a URL and any bytes, and keeps them exactly", async () => {
    const bytes = Uint8Array.of(0x7b, 0xff, 0x7d);
    const request = await signedRequest({ secret, body: bytes, url: new URL("https://example.test/hooks?x=1") });
    expect(request.url).toBe("https://example.test/hooks?x=1");
    expect(new Uint8Array(await request.arrayBuffer())).toEqual(bytes);
    expect(request.headers.get("service-signature")).toBe(hmac(bytes));
  });

  it("signs a copy: changing the array afterwards does not change the request", async () => {
    const bytes = new TextEncoder().encode("{}");
    const request = await signedRequest({ secret, body: bytes });
    bytes[0] = 0x5b;
    expect(await request.text()).toBe("{}");
  });

  it("is refused by the fetch handler under another secret", async () => {
    const handler = webhookHandler({ secret: "other-secret", onEvent: () => undefined });
    const response = await handler(await signedRequest({ secret, event: createEvent("flag.updated") }));
    expect([response.status, (await response.json()).error.code]).toEqual([401, "invalid_signature"]);
  });
});

describe("kit events with the delivery guarantees", () => {
  it("pass a receiver with maxAge and dedupe, and a second copy is absorbed as a duplicate", async () => {
    const seen: string[] = [];
    const handler = webhookHandler({
      secret: "kit-secret",
      maxAge: "1m",
      dedupe: { store: new MemoryDedupeStore(), ttl: "3m" },
      onEvent: (event) => void seen.push(event.id),
    });
    const event = createEvent("flag.updated");
    const first = await handler(await signedRequest({ secret: "kit-secret", event }));
    const copy = await handler(await signedRequest({ secret: "kit-secret", event }));
    const other = await handler(await signedRequest({ secret: "kit-secret", event: createEvent("flag.updated") }));
    expect([first.status, copy.status, copy.headers.get("webhook-duplicate"), other.status]).toEqual([
      204,
      204,
      "true",
      204,
    ]);
    expect(seen).toEqual([event.id, expect.not.stringMatching(event.id)]);
  });
});

describe("on a runtime without Node built-ins (workerd, no compatibility flags)", () => {
  // A worker bundled from the kit and the fetch adapter: no node:* import and no Buffer may be
  // needed anywhere, or it fails to load or to run.
  const worker = `
    import { createEvent, signedDelivery, signedRequest } from "./src/testing/index.ts";
    import { webhookHandler } from "./src/adapters/fetch.ts";
    export default {
      async fetch() {
        const event = createEvent("flag.updated", { environment: "edge" });
        const handler = webhookHandler({ secret: "edge-secret", onEvent: () => undefined });
        const status = (await handler(await signedRequest({ secret: "edge-secret", event }))).status;
        const delivery = await signedDelivery({ secret: "edge-secret", event });
        return Response.json({ status, event, delivery });
      },
    };`;

  it("creates, signs and delivers an event to the fetch handler", async () => {
    const bundle = await build({
      stdin: { contents: worker, resolveDir: root, loader: "ts" },
      bundle: true,
      format: "esm",
      platform: "neutral",
      write: false,
      logLevel: "silent",
    });
    const script = (bundle.outputFiles[0] as { text: string }).text;
    expect(script).not.toMatch(/from\s*["']node:/);
    const mf = new Miniflare({ modules: true, script, compatibilityDate: "2024-09-23" });
    try {
      const result = (await (await mf.dispatchFetch("http://localhost/")).json()) as any;
      expect(result.status).toBe(204);
      expect(result.event).toMatchObject({
        type: "flag.updated",
        environment: "edge",
        id: expect.stringMatching(/^evt_/),
      });
      expect(result.delivery.body).toBe(JSON.stringify(result.event));
      expect(result.delivery.headers["service-signature"]).toBe(
        createHmac("sha256", "edge-secret").update(result.delivery.body).digest("hex"),
      );
    } finally {
      await mf.dispose();
    }
  });
});
