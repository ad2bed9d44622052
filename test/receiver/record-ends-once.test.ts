import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore, type Telemetry } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import type { SignedDelivery } from "flag-webhooks/testing";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { post, serverPerTest } from "../support/http.js";

// Every delivery's record (its span, with OpenTelemetry) ends exactly once, with the outcome that
// happened, whatever the client and the route do: a client that hangs up before, during or after
// a held answer, a route that never answers, answers late, streams then fails, cuts the answer,
// or a server that times the connection out. A Telemetry of the app's own counts the ends.

const SECRET = "record-ends-once-secret";
const serve = serverPerTest();
const fastifies: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const app of fastifies.splice(0)) await app.close();
});

/** A Telemetry that writes down, per delivery, every end it is told. */
function counting() {
  const records: string[][] = [];
  const telemetry: Telemetry = {
    delivery() {
      const ends: string[] = [];
      records.push(ends);
      return {
        verified() {},
        store() {},
        run: (fn) => fn(),
        handler() {},
        end: (outcome, status) => void ends.push(`${outcome} ${status}`),
      };
    },
  };
  return { records, telemetry };
}

/** Writes `d` on a raw connection and hangs up after `ms`, as a sender that timed out. */
async function sendAndLeave(server: Server, ms: number, d: SignedDelivery): Promise<void> {
  const { port } = server.address() as { port: number };
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => {});
  const head = Object.entries(d.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.write(
    `POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${Buffer.byteLength(d.body)}\r\n${head}\r\n${d.body}`,
  );
  await sleep(ms);
  socket.destroy();
}

/** Waits for the records to read `expected`, then a while longer: nothing more may end. */
async function endsOnce(records: string[][], expected: string[][]): Promise<void> {
  await expect.poll(() => records).toEqual(expected);
  await sleep(100);
  expect(records).toEqual(expected);
}

const dedupe = () => ({ store: new MemoryDedupeStore(), ttl: 60_000 });

/** An Express app whose route after the middleware is `route`, with dedupe and the telemetry. */
async function expressRoute(telemetry: Telemetry, route: express.RequestHandler, timeout?: number) {
  const app = express();
  app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, dedupe: dedupe(), onError: () => {} }), route);
  const server = createServer(app);
  if (timeout) server.setTimeout(timeout);
  return serve(server);
}

describe("a delivery's record ends exactly once", () => {
  it("Express, a route that never answers a client that left: client_closed", async () => {
    const { records, telemetry } = counting();
    const server = await expressRoute(telemetry, () => {});
    await sendAndLeave(server, 100, await delivery(SECRET));
    await endsOnce(records, [["client_closed undefined"]]);
  });

  it("Express, a route that answers 200 after the client left: client_closed, once, and the event is handled", async () => {
    const { records, telemetry } = counting();
    const server = await expressRoute(telemetry, (_req, res) => void setTimeout(() => res.sendStatus(200), 150));
    const d = await delivery(SECRET);
    await sendAndLeave(server, 50, d);
    await sleep(250);
    expect((await post(server, d)).duplicate).toBe("true");
    expect(records).toEqual([["client_closed undefined"], ["duplicate 204"]]);
  });

  it("Express, a route that never answers, cut by the server's own timeout: client_closed", async () => {
    const { records, telemetry } = counting();
    const server = await expressRoute(telemetry, () => {}, 150);
    await sendAndLeave(server, 400, await delivery(SECRET));
    await endsOnce(records, [["client_closed undefined"]]);
  });

  it("Express, a route that streams a 2xx then calls next(err): handler_error, once, and the claim is released", async () => {
    const { records, telemetry } = counting();
    const server = await expressRoute(telemetry, (_req, res, next) => {
      res.status(200).write("part");
      setTimeout(() => next(new Error("failed mid-answer")), 30);
    });
    const d = await delivery(SECRET);
    await sendAndLeave(server, 300, d);
    await endsOnce(records, [["handler_error undefined"]]);
    // Released: the retry runs the route again (and ends its own record, once).
    await sendAndLeave(server, 300, d);
    await endsOnce(records, [["handler_error undefined"], ["handler_error undefined"]]);
  });

  it("Express, a route that cuts its answer with res.destroy(): handler_error, once", async () => {
    const { records, telemetry } = counting();
    const server = await expressRoute(telemetry, (_req, res) => void res.destroy());
    await sendAndLeave(server, 100, await delivery(SECRET));
    await endsOnce(records, [["handler_error undefined"]]);
  });

  it("Express onEvent that answers 200 on res and then throws: handler_error 500, once (the 2xx never left)", async () => {
    const { records, telemetry } = counting();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware<express.Request, express.Response>({
        secret: SECRET,
        telemetry,
        dedupe: dedupe(),
        onError: () => {},
        onEvent: (_event, _req, res) => {
          res.status(200).json({ ok: true });
          throw new Error("after answering");
        },
      }),
    );
    const server = await serve(createServer(app));
    expect((await post(server, await delivery(SECRET))).status).toBe(500);
    await endsOnce(records, [["handler_error 500"]]);
  });

  it("Express, a client that leaves while the 2xx is held: handled, once, and the copy is a duplicate", async () => {
    const { records, telemetry } = counting();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware<express.Request, express.Response>({
        secret: SECRET,
        telemetry,
        dedupe: dedupe(),
        onEvent: async (_event, _req, res) => {
          res.status(200).json({ ok: true });
          await sleep(200);
        },
      }),
    );
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    await sendAndLeave(server, 50, d);
    await sleep(250);
    expect((await post(server, d)).duplicate).toBe("true");
    expect(records).toEqual([["handled 200"], ["duplicate 204"]]);
  });

  it("Koa onEvent that outlives a client that left: handled, once", async () => {
    const { records, telemetry } = counting();
    const app = new Koa();
    app.use(koaMiddleware({ secret: SECRET, telemetry, dedupe: dedupe(), onEvent: () => sleep(150) }));
    const server = await serve(createServer(app.callback()));
    await sendAndLeave(server, 50, await delivery(SECRET));
    await endsOnce(records, [["handled 204"]]);
  });

  it("Fastify onEvent that outlives a client that left: handled, once", async () => {
    const { records, telemetry } = counting();
    const app = Fastify();
    fastifies.push(app);
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      telemetry,
      dedupe: dedupe(),
      onEvent: () => sleep(150),
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    await sendAndLeave(app.server, 50, await delivery(SECRET));
    await endsOnce(records, [["handled 204"]]);
  });
});
