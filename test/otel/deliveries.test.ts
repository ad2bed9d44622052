import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { DataPoint } from "@opentelemetry/sdk-metrics";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore, type ReceiverOptions, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as honoMiddleware, type WebhookEnv } from "flag-webhooks/hono";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import { openTelemetry } from "flag-webhooks/otel";
import { Hono } from "hono";
import Koa from "koa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signedHeaders } from "../support/deliveries.js";
import { close, listen } from "../support/http.js";
import { type Sdk, startSdk } from "../support/otel.js";

// Every delivery as one span and a few metric points, through the real OpenTelemetry
// SDK (in-memory exporters) and @opentelemetry/instrumentation-http on real servers, whose
// server span must be the delivery span's parent. One case table, every adapter.

const NEW_SECRET = "otel-test-new-secret-3f9a";
const OLD_SECRET = "otel-test-old-secret-b71c";
const FAILURE = "handler broke on purpose";
const LIMIT = 1024;

let sdk: Sdk;
beforeAll(() => {
  sdk = startSdk();
});
afterAll(() => sdk.shutdown());

/** The handler of every target: one span of its own (which must nest), and a throw when asked. */
async function work(event: WebhookEvent | undefined): Promise<void> {
  await trace.getTracer("app").startActiveSpan("app.handler", async (span) => {
    span.end();
  });
  if ((event?.data as { flag?: string } | undefined)?.flag === "fail") throw new Error(FAILURE);
}

type Options = ReceiverOptions & { onError: () => void };

interface Target {
  name: string;
  /** Whether the adapter itself sees what the handler threw (Express routes hand it to Express). */
  seesThrow: boolean;
  start(options: Options): Promise<Server>;
}

const targets: Target[] = [
  {
    name: "Express with onEvent",
    seesThrow: true,
    start: (options) => {
      const app = express();
      app.all("/webhooks", expressMiddleware({ ...options, onEvent: work }));
      return listen(createServer(app));
    },
  },
  {
    name: "Express, the route after the middleware",
    seesThrow: false,
    start: (options) => {
      const app = express();
      app.set("env", "test");
      app.all("/webhooks", expressMiddleware(options), async (req, res) => {
        await work(req.webhookEvent);
        res.sendStatus(204);
      });
      return listen(createServer(app));
    },
  },
  {
    name: "Koa, the middleware after it",
    seesThrow: true,
    start: (options) => {
      const app = new Koa<WebhookState>();
      app.silent = true;
      app.use(koaMiddleware(options));
      app.use(async (ctx) => {
        await work(ctx.state.webhookEvent);
        ctx.status = 204;
      });
      return listen(createServer(app.callback()));
    },
  },
  {
    name: "Fastify",
    seesThrow: true,
    start: async (options) => {
      const app = Fastify();
      await app.register(webhookPlugin, { ...options, path: "/webhooks", onEvent: work });
      await app.listen({ port: 0, host: "127.0.0.1" });
      return app.server;
    },
  },
  {
    name: "Hono, the handler after the middleware",
    seesThrow: true,
    start: (options) => {
      const app = new Hono<WebhookEnv>();
      app.onError((_error, c) => c.json({ error: { code: "handler_error" } }, 500));
      app.all("/webhooks", honoMiddleware(options), async (c) => {
        await work(c.var.webhookEvent);
        return c.body(null, 204);
      });
      return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    },
  },
  {
    name: "fetch webhookHandler",
    seesThrow: true,
    start: (options) => {
      const handler = webhookHandler({ ...options, onEvent: work });
      return listen(createAdaptorServer({ fetch: handler }) as Server);
    },
  },
];

interface Request {
  method: string;
  headers: Record<string, string>;
  body?: string;
}
interface Case {
  name: string;
  request(prefix: string): Request | Promise<Request>;
  status: number;
  outcome: string;
  /** Whether the span is an error (refusals but duplicates, handler failures). */
  error: boolean;
  /** Whether the event was verified: its attributes, the secret index, a verification counted. */
  verified: boolean;
  /** Store operations timed, in order. */
  store: string[];
  /** Whether the handler ran (its duration recorded, its own span nested). */
  handler: boolean;
  /** Whether the handler's exception is recorded on the span (where the adapter sees it). */
  exception?: boolean;
}

function eventBody(id: string, overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "staging",
    data: { flag: "checkout", changes: [], actor: { type: "user", email: "a@example.com" } },
    ...overrides,
  });
}
async function signed(body: string, secret = OLD_SECRET): Promise<Request> {
  return { method: "POST", headers: await signedHeaders(secret, body), body };
}
const failing = { flag: "fail", changes: [], actor: { type: "user", email: "a@example.com" } };

const cases: Case[] = [
  {
    name: "handled",
    request: (prefix) => signed(eventBody(`${prefix}_1`)),
    status: 204,
    outcome: "handled",
    error: false,
    verified: true,
    store: ["claim", "complete"],
    handler: true,
  },
  {
    name: "duplicate",
    request: (prefix) => signed(eventBody(`${prefix}_1`)),
    status: 204,
    outcome: "duplicate",
    error: false,
    verified: true,
    store: ["claim"],
    handler: false,
  },
  {
    name: "refused: invalid_signature",
    request: (prefix) => signed(eventBody(`${prefix}_2`), "not-the-secret"),
    status: 401,
    outcome: "invalid_signature",
    error: true,
    verified: false,
    store: [],
    handler: false,
  },
  {
    name: "refused: missing_signature",
    request: (prefix) => ({ method: "POST", headers: {}, body: eventBody(`${prefix}_3`) }),
    status: 401,
    outcome: "missing_signature",
    error: true,
    verified: false,
    store: [],
    handler: false,
  },
  {
    name: "refused: invalid_payload",
    request: () => signed("this is not JSON"),
    status: 400,
    outcome: "invalid_payload",
    error: true,
    verified: false,
    store: [],
    handler: false,
  },
  {
    name: "refused: event_expired",
    request: (prefix) => signed(eventBody(`${prefix}_4`, { createdAt: "2020-01-01T00:00:00Z" })),
    status: 401,
    outcome: "event_expired",
    error: true,
    verified: true,
    store: [],
    handler: false,
  },
  {
    name: "refused: method_not_allowed",
    request: () => ({ method: "GET", headers: {} }),
    status: 405,
    outcome: "method_not_allowed",
    error: true,
    verified: false,
    store: [],
    handler: false,
  },
  {
    name: "refused: payload_too_large",
    request: (prefix) => signed(eventBody(`${prefix}_5`, { padding: "x".repeat(LIMIT) })),
    status: 413,
    outcome: "payload_too_large",
    error: true,
    verified: false,
    store: [],
    handler: false,
  },
  {
    name: "handler failure",
    request: (prefix) => signed(eventBody(`${prefix}_6`, { data: failing })),
    status: 500,
    outcome: "handler_error",
    error: true,
    verified: true,
    store: ["claim", "release"],
    handler: true,
    exception: true,
  },
];

async function deliver(server: Server, request: Request): Promise<number> {
  const { port } = server.address() as AddressInfo;
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, request);
  await response.arrayBuffer();
  return response.status;
}

/** Everything exported during the table, to check that no secret, signature or body is in it. */
const exported: { spans: ReadableSpan[]; points: DataPoint<unknown>[] } = { spans: [], points: [] };
const sent: string[] = [];

describe.each(targets)("telemetry through $name", (target) => {
  let server: Server;
  const prefix = `evt_otel_${target.name.replace(/\W+/g, "_")}`;
  beforeAll(async () => {
    server = await target.start({
      secret: [NEW_SECRET, OLD_SECRET],
      limit: LIMIT,
      maxAge: "5m",
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      telemetry: openTelemetry({ tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider }),
      onError: () => {},
    });
  });
  afterAll(() => close(server));

  it.each(cases)("$name", async (c) => {
    sdk.spans.reset();
    await sdk.points();
    const request = await c.request(prefix);
    sent.push(request.body ?? "", ...Object.values(request.headers));
    expect(await deliver(server, request)).toBe(c.status);

    // One delivery span, child of the HTTP server span instrumentation-http made for the request.
    const [receive, ...more] = await sdk.ended("flag-webhooks.receive");
    expect(more).toEqual([]);
    const [http] = await sdk.ended((span) => span.kind === SpanKind.SERVER);
    expect(receive?.parentSpanContext?.spanId).toBe(http?.spanContext().spanId);
    expect(receive?.spanContext().traceId).toBe(http?.spanContext().traceId);

    const attributes = receive?.attributes ?? {};
    expect(attributes["flag_webhooks.outcome"]).toBe(c.outcome);
    expect(attributes["http.response.status_code"]).toBe(c.status);
    if (c.verified) {
      expect(attributes).toMatchObject({
        "flag_webhooks.event.id": expect.stringMatching(new RegExp(`^${prefix}_`)),
        "flag_webhooks.event.type": "flag.updated",
        "flag_webhooks.event.environment": "staging",
        "flag_webhooks.secret_index": 1,
      });
    } else {
      expect(Object.keys(attributes).sort()).toEqual(["flag_webhooks.outcome", "http.response.status_code"]);
    }
    expect(receive?.status.code).toBe(c.error ? SpanStatusCode.ERROR : SpanStatusCode.UNSET);
    if (c.error) expect(receive?.status.message).toBe(c.outcome);
    const exceptions = receive?.events.filter((event) => event.name === "exception") ?? [];
    if (c.exception && target.seesThrow) {
      expect(exceptions).toHaveLength(1);
      expect(exceptions[0]?.attributes?.["exception.message"]).toBe(FAILURE);
    } else {
      expect(exceptions).toEqual([]);
    }
    // The handler's own span nests under the delivery's.
    const own = sdk.spans.getFinishedSpans().filter((span) => span.name === "app.handler");
    expect(own.map((span) => span.parentSpanContext?.spanId)).toEqual(c.handler ? [receive?.spanContext().spanId] : []);

    const points = await sdk.points();
    const byType = c.verified
      ? { "flag_webhooks.outcome": c.outcome, "flag_webhooks.event.type": "flag.updated" }
      : { "flag_webhooks.outcome": c.outcome };
    expect(points.get("flag_webhooks.deliveries")?.map((p) => [p.attributes, p.value])).toEqual([[byType, 1]]);
    expect(points.get("flag_webhooks.verifications")?.map((p) => [p.attributes, p.value]) ?? []).toEqual(
      c.verified ? [[{ "flag_webhooks.secret_index": 1 }, 1]] : [],
    );
    const handler = points.get("flag_webhooks.handler.duration") ?? [];
    expect(handler.map((p) => [p.attributes, (p.value as { count: number }).count])).toEqual(
      c.handler ? [[byType, 1]] : [],
    );
    const store = points.get("flag_webhooks.store.duration") ?? [];
    expect(store.map((p) => p.attributes["flag_webhooks.store.operation"]).sort()).toEqual([...c.store].sort());
    for (const point of [...handler, ...store]) {
      const { min, max } = point.value as { min: number; max: number };
      // Seconds, not milliseconds: a local handler or memory store takes well under one.
      expect(min).toBeGreaterThanOrEqual(0);
      expect(max).toBeLessThan(1);
    }
    exported.spans.push(...sdk.spans.getFinishedSpans());
    for (const list of points.values()) exported.points.push(...list);
  });
});

describe("what telemetry exports", () => {
  it("never holds a secret, a signature or a body", () => {
    expect(exported.spans.length).toBeGreaterThan(targets.length * cases.length);
    const text = JSON.stringify({
      spans: exported.spans.map((span) => ({
        name: span.name,
        attributes: span.attributes,
        events: span.events,
        status: span.status,
        links: span.links,
      })),
      points: exported.points.map((point) => point.attributes),
    });
    const secrets = [NEW_SECRET, OLD_SECRET, "not-the-secret"];
    const signatures = sent.filter((value) => /^[0-9a-f]{64}$/.test(value));
    expect(signatures.length).toBeGreaterThan(targets.length * 5);
    const bodies = sent.filter((value) => value.length > 20 && !/^[0-9a-f]{64}$/.test(value));
    for (const value of [...secrets, ...signatures, ...bodies]) expect(text).not.toContain(value);
    // What a body holds beyond the id, type and environment: the flag and the actor.
    expect(text).not.toContain("checkout");
    expect(text).not.toContain("a@example.com");
  });
});

describe("the telemetry option", () => {
  it("is checked when the receiver is made", () => {
    expect(() => webhookHandler({ secret: OLD_SECRET, telemetry: {} as never, onEvent: () => {} })).toThrow(
      /option "telemetry" must be a Telemetry/,
    );
  });

  it("changes no answer when a Telemetry of your own throws: each failure goes to onError", async () => {
    const fail = () => {
      throw new Error("telemetry broke");
    };
    const reported: unknown[] = [];
    const handled: string[] = [];
    const handler = webhookHandler({
      secret: OLD_SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      telemetry: {
        delivery: () => ({ verified: fail, store: fail, handler: fail, end: fail, run: (run) => run() }),
      },
      onEvent: (event) => void handled.push(event.id),
      onError: (error) => void reported.push(error),
    });
    const { body, headers } = await signed(eventBody("evt_otel_throwing"));
    const post = () => handler(new Request("http://localhost/webhooks", { method: "POST", headers, body }));
    expect((await post()).status).toBe(204);
    expect((await post()).headers.get("webhook-duplicate")).toBe("true");
    expect(handled).toEqual(["evt_otel_throwing"]);
    // verified, claim, handler, complete, end; then verified, claim, end of the duplicate.
    expect(reported.map((error) => (error as Error).message)).toEqual(Array(8).fill("telemetry broke"));

    const broken = webhookHandler({
      secret: OLD_SECRET,
      telemetry: { delivery: fail as never },
      onEvent: () => {},
      onError: (error) => void reported.push(error),
    });
    const response = await broken(new Request("http://localhost/webhooks", { method: "POST", headers, body }));
    expect(response.status).toBe(204);
    expect(reported).toHaveLength(9);
  });
});
