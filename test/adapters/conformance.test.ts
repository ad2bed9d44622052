import { createServer, type Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { webhookMiddleware as expressMiddleware, type WebhookRequest } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as honoMiddleware } from "flag-webhooks/hono";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import { Hono } from "hono";
import Koa from "koa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCases, type DeliveryCase, LIMIT, SECRET, SECRETS } from "../support/cases.js";
import { type Answer, close, listen, send } from "../support/http.js";

const cases = await buildCases();
const options = { secret: SECRETS, limit: LIMIT };

/** Each adapter as a user mounts it; the application answers 200 with the event it was handed. */
const nodeServers: { name: string; make: () => Server | Promise<Server> }[] = [
  {
    name: "Express 5",
    make() {
      const app = express();
      app.use("/webhooks", expressMiddleware(options), (req, res) => {
        res.json({ received: req.webhookEvent });
      });
      return createServer(app);
    },
  },
  {
    name: "Koa 3",
    make() {
      const app = new Koa<WebhookState>();
      app.use(koaMiddleware(options));
      app.use((ctx) => {
        ctx.body = { received: ctx.state.webhookEvent };
      });
      return createServer(app.callback());
    },
  },
  {
    name: "Fastify 5",
    async make() {
      const app = Fastify();
      await app.register(webhookPlugin, {
        ...options,
        path: "/webhooks",
        onEvent: (event, _request, reply) => reply.send({ received: event }),
      });
      await app.ready();
      return app.server;
    },
  },
  {
    name: "Hono 4 on @hono/node-server",
    make() {
      const app = new Hono();
      app.all("/webhooks", honoMiddleware(options), (c) => c.json({ received: c.var.webhookEvent }));
      return createAdaptorServer({ fetch: app.fetch }) as Server;
    },
  },
  {
    name: "plain node:http with the Express middleware",
    make() {
      const middleware = expressMiddleware(options);
      return createServer((req, res) => {
        void middleware(req, res, () => {
          res.setHeader("content-type", "application/json");
          res.end(JSON.stringify({ received: (req as WebhookRequest).webhookEvent }));
        });
      });
    },
  },
];

/** Words each refusal's message must contain, so a client can tell what went wrong. */
const MESSAGES: Record<string, RegExp> = {
  missing_signature: /missing service-signature header/,
  invalid_signature: /service-signature header is not the HMAC-SHA256 of the body/,
  invalid_payload: /must be|not valid/,
  payload_too_large: new RegExp(`larger than the limit of ${LIMIT} bytes`),
  method_not_allowed: /method (GET|PUT) not allowed/,
};

const CLOSES = new Set(["payload_too_large", "method_not_allowed", "missing_signature"]);

function expectAnswer(c: DeliveryCase, answer: Answer, overHttp = true): void {
  expect(answer.status).toBe(c.status);
  // Only a 405 advertises Allow. A refusal answered before the body was read (405, no signature,
  // too large) closes the connection (node servers), so an unsigned body is never drained.
  expect(answer.headers.allow).toBe(c.code === "method_not_allowed" ? "POST" : undefined);
  if (overHttp) {
    expect(answer.headers.connection).toBe(c.code && CLOSES.has(c.code) ? "close" : "keep-alive");
  }
  if (c.code) {
    expect(answer.json).toEqual({ error: { code: c.code, message: expect.stringMatching(MESSAGES[c.code] ?? /./) } });
    expect(String(answer.headers["content-type"])).toMatch(/^application\/json/);
    const text = JSON.stringify(answer.json);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(SECRETS[0]);
  } else {
    expect(answer.json.received.type).toBe(c.eventType);
    expect(answer.json.received.id).toBe("evt_01HZX3K9");
  }
}

describe.each(nodeServers)("$name", ({ make }) => {
  let server: Server;
  beforeAll(async () => {
    server = await listen(await make());
  });
  afterAll(() => close(server));

  it.each(cases)("$name", async (c) => {
    expectAnswer(c, await send(server, c), true);
  });

  it("keeps serving valid deliveries after every hostile request in the table", async () => {
    const valid = cases[0] as DeliveryCase;
    for (const c of cases) await send(server, c);
    expectAnswer(valid, await send(server, valid));
  });
});

describe("fetch handler with real Request objects", () => {
  const handler = webhookHandler({ ...options, onEvent: (event) => Response.json({ received: event }) });

  function toRequest(c: DeliveryCase): Request {
    const headers = new Headers();
    for (const [name, value] of Object.entries(c.headers)) {
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    const method = c.method ?? "POST";
    if (method === "GET") return new Request("http://localhost/webhooks", { method, headers });
    const body = c.streamed
      ? new ReadableStream<Uint8Array>({
          start(controller) {
            const step = Math.ceil(c.body.length / 4);
            for (let i = 0; i < c.body.length; i += step) controller.enqueue(c.body.subarray(i, i + step));
            controller.close();
          },
        })
      : c.body;
    return new Request("http://localhost/webhooks", { method, headers, body, duplex: "half" } as RequestInit);
  }

  it.each(cases)("$name", async (c) => {
    const response = await handler(toRequest(c));
    const text = await response.text();
    expectAnswer(
      c,
      {
        status: response.status,
        headers: Object.fromEntries(response.headers),
        json: text ? JSON.parse(text) : undefined,
      },
      false,
    );
  });
});
