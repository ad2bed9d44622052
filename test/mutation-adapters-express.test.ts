import { createHmac } from "node:crypto";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { MemoryDedupeStore, type Telemetry } from "flag-webhooks";
import { keepRawBody, webhookMiddleware } from "flag-webhooks/express";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "./support/http.js";
import { signedDelivery } from "./support/signed-delivery.js";

// The Express middleware (and the node:http helpers under it) over real HTTP: keepRawBody, an
// answer onEvent streams over several ticks, the routes run inside the telemetry's context, a
// route that cuts the connection, and a client that goes away in the middle of the body.
const SECRET = "mutation-express-secret";
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

async function start(app: express.Express): Promise<number> {
  server = await listen(createServer(app));
  return (server.address() as AddressInfo).port;
}

async function post(port: number, d: { body: string; headers: Record<string, string> }) {
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    body: d.body,
    headers: d.headers,
  });
  return { status: response.status, text: await response.text(), duplicate: response.headers.get("webhook-duplicate") };
}

/** A Telemetry of the app's own that records each delivery's outcome and whether code ran inside `run`. */
function recording() {
  const outcomes: string[] = [];
  let inside = false;
  const telemetry: Telemetry = {
    delivery: () => ({
      verified() {},
      store() {},
      run(handler) {
        inside = true;
        try {
          return handler();
        } finally {
          inside = false;
        }
      },
      handler() {},
      end: (outcome) => void outcomes.push(outcome),
    }),
  };
  return { telemetry, outcomes, inside: () => inside };
}

describe("Express middleware", () => {
  it("verifies the bytes keepRawBody kept for express.json(), and the route still gets the parsed body", async () => {
    const app = express();
    app.use(express.json({ verify: keepRawBody }));
    app.post("/webhooks", webhookMiddleware({ secret: SECRET }), (req, res) => {
      res.json({ parsed: (req.body as { id?: string }).id, event: req.webhookEvent?.id });
    });
    const port = await start(app);
    const d = signedDelivery(SECRET);
    const pretty = JSON.stringify(JSON.parse(d.body), null, 2);
    const headers = { ...d.headers, "service-signature": createHmac("sha256", SECRET).update(pretty).digest("hex") };
    const answer = await post(port, { body: pretty, headers });
    const id = JSON.parse(d.body).id;
    expect([answer.status, JSON.parse(answer.text)]).toEqual([200, { parsed: id, event: id }]);
  });

  it("leaves an answer onEvent began on res and ends later alone, instead of cutting it", async () => {
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({
        secret: SECRET,
        onEvent(_event, _req, res) {
          res.writeHead(200, { "content-type": "text/plain" });
          res.write("first part, ");
          setTimeout(() => res.end("second part"), 20);
        },
      }),
    );
    const port = await start(app);
    expect(await post(port, signedDelivery(SECRET))).toMatchObject({ status: 200, text: "first part, second part" });
  });

  it("runs the routes after it inside the telemetry's run, so their work nests in the delivery", async () => {
    const { telemetry, outcomes, inside } = recording();
    const seen: boolean[] = [];
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry }), (_req, res) => {
      seen.push(inside());
      res.sendStatus(204);
    });
    const port = await start(app);
    expect((await post(port, signedDelivery(SECRET))).status).toBe(204);
    expect(seen).toEqual([true]);
    for (let i = 0; i < 100 && outcomes.length === 0; i++) await sleep(5);
    expect(outcomes).toEqual(["handled"]);
  });

  it("releases the claim when the route cuts the connection with res.destroy(), so the retry runs it", async () => {
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h", inFlightTtl: "1h" } }),
      (_req, res) => {
        runs++;
        if (runs === 1) res.destroy();
        else res.status(200).send("second run");
      },
    );
    const port = await start(app);
    const d = signedDelivery(SECRET);
    await expect(post(port, d)).rejects.toThrow();
    const retry = await post(port, d);
    expect([retry.status, retry.text, runs]).toEqual([200, "second run", 2]);
    const copy = await post(port, d);
    expect([copy.status, copy.duplicate, runs]).toEqual([204, "true", 2]);
  });

  it("refuses a body the client stopped sending halfway as invalid_payload at once, not after the body timeout", async () => {
    const { telemetry, outcomes } = recording();
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, bodyTimeout: "20s" }), (_req, res) => {
      res.sendStatus(204);
    });
    const port = await start(app);
    const d = signedDelivery(SECRET);
    const req = httpRequest({
      host: "127.0.0.1",
      port,
      path: "/webhooks",
      method: "POST",
      headers: { ...d.headers, "content-length": String(d.body.length) },
    });
    req.on("error", () => {});
    req.write(d.body.slice(0, 10));
    await sleep(50);
    req.destroy();
    for (let i = 0; i < 200 && outcomes.length === 0; i++) await sleep(5);
    expect(outcomes).toEqual(["invalid_payload"]);
  });
});

describe("the wire watch (src/node/settle-on-answer.ts)", () => {
  it("gives the response its own methods back once the answer is sent", async () => {
    const restored: boolean[] = [];
    const middleware = webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } });
    server = await listen(
      createServer((req, res) => {
        res.on("finish", () => {
          const proto = Object.getPrototypeOf(res) as typeof res;
          restored.push(res.end === proto.end && res.writeHead === proto.writeHead && res.destroy === proto.destroy);
        });
        void middleware(req, res, () => {
          // While the route answers, the watch is in place.
          restored.push(res.end !== Object.getPrototypeOf(res).end);
          res.writeHead(204).end();
        });
      }),
    );
    const port = (server.address() as AddressInfo).port;
    expect((await post(port, signedDelivery(SECRET))).status).toBe(204);
    await sleep(20);
    expect(restored).toEqual([true, true]);
  });
});
