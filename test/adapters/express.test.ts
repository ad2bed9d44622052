import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import express, { type NextFunction, type Request, type Response } from "express";
import { MemoryDedupeStore, type Telemetry } from "flag-webhooks";
import { keepRawBody, webhookMiddleware } from "flag-webhooks/express";
import supertest from "supertest";
import { describe, expect, it, vi } from "vitest";
import { delivery, signatureOf, signedHeaders } from "../support/deliveries.js";
import { post, serverPerTest } from "../support/http.js";
import { vector } from "../support/vectors.js";

// The Express middleware (and the node:http helpers under it) in real Express 5 apps and plain
// node:http servers over real HTTP: the body parsers it meets, limits read from Content-Length or
// the stream, keepRawBody, clients that hang up, answers onEvent streams or cuts, the status that
// settles the claim, and the promise it returns. The shared case table: conformance.test.ts.

const { secret, body, signature } = vector("flag-updated-compact");
const pretty = vector("flag-updated-pretty");
const sign = (bytes: Buffer | string) => signatureOf(secret, bytes);

const SECRET = "express-secret";
const serve = serverPerTest();

/** Listens on a loopback port for the test, and answers with `app`. */
const start = (app: express.Express) => serve(createServer(app));

/** A node:http server of requests answered by `handler`, for the test; its port. */
async function serveRequests(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  return ((await serve(createServer(handler))).address() as AddressInfo).port;
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

/** An app whose /webhooks route runs `before`, then the middleware, then answers with the event. */
function app(before: express.RequestHandler[] = [], options: Parameters<typeof webhookMiddleware>[0] = { secret }) {
  const application = express();
  const reached = vi.fn();
  const errors = vi.fn();
  application.post("/webhooks", ...before, webhookMiddleware(options), (req, res) => {
    reached();
    res.json({
      type: req.webhookEvent?.type,
      flag: req.webhookEvent?.type === "flag.updated" && req.webhookEvent.data.flag,
    });
  });
  application.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    errors(error);
    res.status(599).end();
  });
  return { application, reached, errors };
}

describe("Express middleware", () => {
  it("answers a refused delivery itself and calls neither the route nor the error handler", async () => {
    const { application, reached, errors } = app();
    const res = await supertest(application).post("/webhooks").set("service-signature", "0".repeat(64)).send("{}");
    expect([res.status, res.body.error.code]).toEqual([401, "invalid_signature"]);
    expect(reached).not.toHaveBeenCalled();
    expect(errors).not.toHaveBeenCalled();
  });

  it("explains body_already_parsed when express.json() ran first, instead of a 401 or a hang", async () => {
    const { application, reached } = app([express.json()]);
    const res = await supertest(application)
      .post("/webhooks")
      .set("content-type", "application/json")
      .set("service-signature", signature)
      .send(body.toString());
    expect(res.status).toBe(500);
    expect(res.body.error.code).toBe("body_already_parsed");
    expect(res.body.error.message).toMatch(/^req\.body was already parsed/);
    expect(res.body.error.message).toMatch(/express\.json\(\)/);
    expect(res.body.error.message).toMatch(/express\.raw\(\{ type: "\*\/\*" \}\)/);
    expect(res.body.error.message).toMatch(/keepRawBody/);
    expect(reached).not.toHaveBeenCalled();
  });

  it("explains body_already_parsed after express.text() too", async () => {
    const { application } = app([express.text({ type: "*/*" })]);
    const res = await supertest(application)
      .post("/webhooks")
      .set("content-type", "text/plain")
      .set("service-signature", signature)
      .send(body.toString());
    expect([res.status, res.body.error.code]).toEqual([500, "body_already_parsed"]);
  });

  it("reads the stream when express.json() skipped a body of another content type", async () => {
    const { application } = app([express.json()]);
    const res = await supertest(application)
      .post("/webhooks")
      .set("content-type", "text/plain")
      .set("service-signature", signature)
      .send(body.toString());
    expect(res.body).toEqual({ type: "flag.updated", flag: "new-checkout" });
  });

  it("uses the Buffer left by express.raw()", async () => {
    const { application } = app([express.raw({ type: "*/*" })]);
    const res = await supertest(application)
      .post("/webhooks")
      .set("service-signature", pretty.signature)
      .send(pretty.body);
    expect(res.body).toEqual({ type: "flag.updated", flag: "new-checkout" });
  });

  it("prefers req.rawBody kept by express.json({ verify }) over the parsed req.body", async () => {
    const keepRaw = express.json({
      verify: (req, _res, buf) => {
        (req as unknown as { rawBody?: Buffer }).rawBody = buf;
      },
    });
    const { application } = app([keepRaw]);
    // Pretty JSON: re-serialising the parsed body would give other bytes and fail the check.
    // (A string: superagent JSON-encodes a Buffer sent as application/json.)
    const res = await supertest(application)
      .post("/webhooks")
      .set("content-type", "application/json")
      .set("service-signature", pretty.signature)
      .send(pretty.body.toString());
    expect(res.body).toEqual({ type: "flag.updated", flag: "new-checkout" });
  });

  it("uses req.rawBody as Google Cloud Functions and Firebase set it", async () => {
    const cloudFunctions: express.RequestHandler = (req, _res, next) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        (req as unknown as { rawBody?: Buffer }).rawBody = Buffer.concat(chunks);
        req.body = JSON.parse((req as unknown as { rawBody?: Buffer }).rawBody?.toString() ?? "null");
        next();
      });
    };
    const { application } = app([cloudFunctions]);
    const res = await supertest(application).post("/webhooks").set("service-signature", signature).send(body);
    expect(res.body).toEqual({ type: "flag.updated", flag: "new-checkout" });
  });

  it("still applies the limit to raw bytes another parser already read", async () => {
    const big = Buffer.alloc(2048, " ");
    const { application } = app([express.raw({ type: "*/*", limit: "10mb" })], { secret, limit: "1kb" });
    const res = await supertest(application)
      .post("/webhooks")
      .set("content-type", "application/octet-stream") // express.raw parses only a body with a type
      .set("service-signature", await sign(big))
      .send(big);
    expect([res.status, res.body.error.code]).toEqual([413, "payload_too_large"]);
  });

  it("takes the limit as a size string: 2kb passes 2048 bytes and refuses 2049", async () => {
    const event = Buffer.concat([body, Buffer.alloc(2048 - body.length, " ")]);
    const { application } = app([], { secret, limit: "2kb" });
    const ok = await supertest(application)
      .post("/webhooks")
      .set("service-signature", await sign(event))
      .send(event);
    expect(ok.status).toBe(200);
    const over = Buffer.concat([event, Buffer.from(" ")]);
    const res = await supertest(application)
      .post("/webhooks")
      .set("service-signature", await sign(over))
      .send(over);
    expect(res.status).toBe(413);
  });

  it("answers 413 at once when Content-Length announces more than the limit, without waiting for the body", async () => {
    const { application } = app([], { secret, limit: 1024 });
    const server = await serve(createServer(application));
    const { port } = server.address() as { port: number };
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.write(
          `POST /webhooks HTTP/1.1\r\nHost: x\r\nService-Signature: ${signature}\r\nContent-Length: 50000000\r\n\r\n{`,
        );
      });
      let text = "";
      socket.on("data", (d) => {
        text += d;
        if (text.includes("\r\n\r\n")) {
          socket.destroy();
          resolve(text);
        }
      });
    });
    expect(answer).toMatch(/^HTTP\/1.1 413/);
    expect(answer.toLowerCase()).toContain("connection: close");
  });

  it("stops reading a streamed body at the limit: the answer comes while the client is still sending", async () => {
    const { application } = app([], { secret, limit: 64 * 1024 });
    const server = await serve(createServer(application));
    const { port } = server.address() as { port: number };
    const chunk = Buffer.alloc(16 * 1024, "a");
    const total = 64 * 1024 * 1024;
    const result = await new Promise<{ status: number; sent: number }>((resolve, reject) => {
      let sent = 0;
      let answered = false;
      const socket = connect(port, "127.0.0.1", () => {
        socket.write(
          `POST /webhooks HTTP/1.1\r\nHost: x\r\nService-Signature: ${signature}\r\nTransfer-Encoding: chunked\r\n\r\n`,
        );
        const pump = () => {
          while (!answered && sent < total) {
            sent += chunk.length;
            if (!socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)) return void socket.once("drain", pump);
          }
          if (!answered) socket.write("0\r\n\r\n"); // all sent: a reader that never stopped answers now
        };
        pump();
      });
      socket.on("data", (d) => {
        answered = true;
        resolve({ status: Number(String(d).slice(9, 12)), sent });
        socket.destroy();
      });
      socket.on("error", (e) => (answered ? undefined : reject(e)));
    });
    expect(result.status).toBe(413);
    expect(result.sent).toBeLessThan(total);
  });

  it("checks options when it is created, not on the first request", () => {
    expect(() => webhookMiddleware({ secret: "" })).toThrow(/"secret"/);
    expect(() => webhookMiddleware({ secret: [] })).toThrow(TypeError);
    expect(() => webhookMiddleware({ secret, limit: "lots" })).toThrow(/"limit"/);
    expect(() => webhookMiddleware({ secret, limit: -1 })).toThrow(/"limit"/);
    expect(() => webhookMiddleware(undefined as never)).toThrow(/"secret"/);
  });

  it("answers invalid_payload to a client that sends half a body and hangs up, and keeps serving", async () => {
    const middleware = webhookMiddleware({ secret });
    const answered: { status: number; body: string }[] = [];
    const server = await serve(
      createServer((req, res) => {
        const end = res.end.bind(res);
        // Record what the server answered, since the client is gone by then.
        res.end = ((chunk: unknown) => {
          answered.push({ status: res.statusCode, body: String(chunk) });
          return end(chunk as string);
        }) as typeof res.end;
        void middleware(req, res, () => res.end("ok"));
      }),
    );
    const { port } = server.address() as { port: number };
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(
        `POST /webhooks HTTP/1.1\r\nHost: x\r\nService-Signature: ${signature}\r\nContent-Length: 1000\r\n\r\n{"id":`,
      );
      setTimeout(() => socket.destroy(), 50);
    });
    await vi.waitFor(() => expect(answered).toHaveLength(1));
    expect(answered[0]?.status).toBe(400);
    expect(JSON.parse(answered[0]?.body ?? "")).toEqual({
      error: { code: "invalid_payload", message: "the request body was not fully received" },
    });
    const res = await supertest(server).post("/webhooks").set("service-signature", signature).send(body);
    expect([res.status, res.text]).toEqual([200, "ok"]);
  });

  it("does not throw when an earlier handler already sent the headers; the connection is dropped instead", async () => {
    const middleware = webhookMiddleware({ secret });
    const failures: unknown[] = [];
    const server = await serve(
      createServer((req, res) => {
        if (req.url === "/early") {
          res.writeHead(200);
          res.flushHeaders();
        }
        middleware(req, res, () => res.end("ok")).catch((error: unknown) => failures.push(error));
      }),
    );
    await expect(supertest(server).post("/early").send("{}")).rejects.toThrow();
    const res = await supertest(server).post("/webhooks").set("service-signature", signature).send(body);
    expect([res.status, res.text]).toEqual([200, "ok"]);
    expect(failures).toEqual([]);
  });
});

describe("Express middleware over real HTTP", () => {
  it("verifies the bytes keepRawBody kept for express.json(), so a route behind a global JSON parser verifies, and the route still gets the parsed body", async () => {
    const app = express();
    app.use(express.json({ verify: keepRawBody }));
    app.post("/webhooks", webhookMiddleware({ secret: SECRET }), (req, res) => {
      res.json({ parsed: (req.body as { id?: string }).id, event: req.webhookEvent?.id, type: typeof req.body });
    });
    const d = await delivery(SECRET);
    // Pretty-printed: the parsed body serialised again would be other bytes.
    const pretty = JSON.stringify(JSON.parse(d.body), null, 2);
    const answer = await post(await start(app), { body: pretty, headers: await signedHeaders(SECRET, pretty) });
    const id = JSON.parse(d.body).id;
    expect([answer.status, JSON.parse(answer.text)]).toEqual([200, { parsed: id, event: id, type: "object" }]);
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
    const server = await start(app);
    expect(await post(server, await delivery(SECRET))).toMatchObject({ status: 200, text: "first part, second part" });
  });

  it("runs the routes after it inside the telemetry's run, so their work nests in the delivery", async () => {
    const { telemetry, outcomes, inside } = recording();
    const seen: boolean[] = [];
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry }), (_req, res) => {
      seen.push(inside());
      res.sendStatus(204);
    });
    const server = await start(app);
    expect((await post(server, await delivery(SECRET))).status).toBe(204);
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
    const server = await start(app);
    const d = await delivery(SECRET);
    await expect(post(server, d)).rejects.toThrow();
    const retry = await post(server, d);
    expect([retry.status, retry.text, runs]).toEqual([200, "second run", 2]);
    const copy = await post(server, d);
    expect([copy.status, copy.duplicate, runs]).toEqual([204, "true", 2]);
  });

  it("refuses a body the client stopped sending halfway as invalid_payload at once, not after the body timeout", async () => {
    const { telemetry, outcomes } = recording();
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, telemetry, bodyTimeout: "20s" }), (_req, res) => {
      res.sendStatus(204);
    });
    const server = await start(app);
    const d = await delivery(SECRET);
    const { port } = server.address() as AddressInfo;
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

describe("the wire watch on a Node response", () => {
  it("gives the response its own methods back once the answer is sent", async () => {
    const restored: boolean[] = [];
    const middleware = webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } });
    const server = await serve(
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
    expect((await post(server, await delivery(SECRET))).status).toBe(204);
    await sleep(20);
    expect(restored).toEqual([true, true]);
  });
});

describe("express.json({ verify: keepRawBody }) before the middleware", () => {
  function jsonApp(jsonOptions: Parameters<typeof express.json>[0]) {
    const application = express();
    application.use(express.json(jsonOptions));
    application.post("/webhooks", webhookMiddleware({ secret }), (req, res) => {
      res.json({ type: req.webhookEvent?.type, parsed: typeof req.body });
    });
    return application;
  }

  it("hits body-parser's own 100 KiB limit first unless the parser's limit is raised (as the README says)", async () => {
    const big = Buffer.concat([body.subarray(0, -1), Buffer.alloc(200 * 1024 - body.length, " "), body.subarray(-1)]);
    const signatureOfBig = await sign(big);
    const send = (application: express.Express) =>
      supertest(application)
        .post("/webhooks")
        .set("content-type", "application/json")
        .set("service-signature", signatureOfBig)
        .send(big.toString());
    const refused = await send(jsonApp({ verify: keepRawBody }));
    expect(refused.status).toBe(413);
    expect(refused.headers["content-type"]).toMatch(/text\/html/); // body-parser's answer, not ours
    const accepted = await send(jsonApp({ verify: keepRawBody, limit: "1mb" }));
    expect([accepted.status, accepted.body.type]).toEqual([200, "flag.updated"]);
  });
});

describe("the status the sender got settles the claim", () => {
  it("a res.end() that throws (a number as the body) answers 500: the retry runs the route", async () => {
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }),
      (_req, res) => {
        runs++;
        // A common slip: res.end(count). Node throws ERR_INVALID_ARG_TYPE before writing anything.
        if (runs === 1) res.status(200).end(42 as unknown as string);
        else res.sendStatus(204);
      },
    );
    app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).end();
    });
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    expect((await post(server, d)).status).toBe(500);
    // Not settled with the 200 set before the real end(), which then threw: nothing was sent.
    expect(await post(server, d)).toMatchObject({ status: 204, duplicate: null });
    expect(runs).toBe(2);
  });

  it("the status on the wire counts: 200 sent, then res.status(503) too late, is handled (a copy is a duplicate)", async () => {
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }),
      (_req, res) => {
        runs++;
        res.status(200).write("partial ");
        // The route changes its mind after the head went out: Express sets statusCode silently.
        res.status(503).end("failed");
      },
    );
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    expect((await post(server, d)).status).toBe(200);
    // Not settled with res.statusCode (503): the sender got 200 and will not retry, so releasing
    // the claim would let the next copy of the event run the route a second time.
    expect(await post(server, d)).toMatchObject({ status: 204, duplicate: "true" });
    expect(runs).toBe(1);
  });
});

describe("the Express middleware on the synchronous path", () => {
  interface Seen {
    returned: unknown[];
    nextCalls: number;
  }

  /** A node:http server whose requests carry `rawBody` (as a body parser leaves it) when asked. */
  async function start(options: Parameters<typeof webhookMiddleware>[0]): Promise<{ port: number; seen: Seen }> {
    const middleware = webhookMiddleware(options);
    const seen: Seen = { returned: [], nextCalls: 0 };
    const port = await serveRequests((req, res) => {
      const rawBody = req.headers["x-raw-body"];
      if (typeof rawBody === "string") (req as IncomingMessage & { rawBody: string }).rawBody = rawBody;
      if (req.headers["x-consume"]) req.resume();
      const run = () => {
        let result: unknown;
        try {
          result = middleware(req, res, () => {
            seen.nextCalls++;
            res.writeHead(204).end();
          });
        } catch (error) {
          result = error;
          res.writeHead(599).end();
        }
        seen.returned.push(result);
      };
      if (req.headers["x-consume"]) req.on("end", run);
      else run();
    });
    return { port, seen };
  }

  async function post(port: number, headers: Record<string, string>, body = "", method = "POST"): Promise<number> {
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      method,
      headers,
      body: method === "GET" ? undefined : body,
    });
    await response.arrayBuffer();
    return response.status;
  }

  const event = (createdAt = new Date().toISOString()) =>
    JSON.stringify({ id: `evt_${Math.random()}`, type: "flag.created", createdAt, environment: "p", data: {} });

  it("returns a Promise and answers every kind of request, never throwing synchronously", async () => {
    const { port, seen } = await start({
      secret,
      maxAge: "5m",
      onVerified: () => {
        throw new Error("a hook that throws changes no answer");
      },
      onRejected: () => {
        throw new Error("neither does this one");
      },
      onError: () => {},
    });
    const good = event();
    const stale = event("2001-01-01T00:00:00Z");
    const cases: [Record<string, string>, string, string, number][] = [
      [{}, "", "GET", 405],
      [{}, good, "POST", 401],
      [{ "service-signature": (await sign(good)).toUpperCase(), "x-raw-body": good }, "", "POST", 401],
      [{ "service-signature": await signatureOf("other", good), "x-raw-body": good }, "", "POST", 401],
      [{ "service-signature": await sign("{"), "x-raw-body": "{" }, "", "POST", 400],
      [{ "service-signature": await sign(stale), "x-raw-body": stale }, "", "POST", 401],
      [{ "service-signature": await sign(good), "x-raw-body": good.replace("p", "q") }, "", "POST", 401],
      [{ "service-signature": await sign(good), "x-raw-body": good }, "", "POST", 204],
      [{ "service-signature": await sign(good) }, good, "POST", 204],
      // The stream was read by something else, and no raw bytes kept: body_already_parsed.
      [{ "service-signature": await sign(good), "x-consume": "1" }, good, "POST", 500],
    ];
    const statuses: number[] = [];
    for (const [headers, body, method] of cases) statuses.push(await post(port, headers, body, method));
    expect(statuses).toEqual(cases.map((c) => c[3]));
    expect(seen.returned).toHaveLength(cases.length);
    for (const value of seen.returned) expect(value).toBeInstanceOf(Promise);
    await Promise.all(seen.returned);
    expect(seen.nextCalls).toBe(2);
  });

  it("answers 500 through refuse when the clock throws on the synchronous path, and keeps serving", async () => {
    let calls = 0;
    const errors: unknown[] = [];
    const { port, seen } = await start({
      secret,
      maxAge: 60_000,
      now: () => {
        if (++calls === 1) throw new Error("clock broke");
        return Date.now();
      },
      onError: (error) => errors.push(error),
    });
    const body = event();
    const headers = { "service-signature": await sign(body), "x-raw-body": body };
    expect(await post(port, headers)).toBe(500);
    expect(await post(port, headers)).toBe(204);
    expect(errors).toHaveLength(1);
    for (const value of seen.returned) expect(value).toBeInstanceOf(Promise);
  });

  it("with dedupe and onEvent, still a Promise, and a repeat on the synchronous body path is a duplicate", async () => {
    const handled: string[] = [];
    const { port, seen } = await start({
      secret,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent: (e) => {
        handled.push(e.id);
      },
    });
    const body = event();
    const headers = { "service-signature": await sign(body), "x-raw-body": body };
    expect(await post(port, headers)).toBe(204);
    const repeat = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers });
    expect(repeat.status).toBe(204);
    expect(repeat.headers.get("webhook-duplicate")).toBe("true");
    expect(handled).toHaveLength(1);
    for (const value of seen.returned) expect(value).toBeInstanceOf(Promise);
  });
});

describe("the Express middleware's promise contract on the synchronous path", () => {
  it("rejects its returned Promise, never throws, when the next handler throws", async () => {
    // A plain node:http (or Connect) user handles the route's failure on the promise the
    // middleware is typed to return. With the raw bytes already there, next() runs synchronously,
    // and its throw must still reject that promise, not escape past the caller's .catch.
    const middleware = webhookMiddleware({ secret });
    let threwSynchronously = false;
    const port = await serveRequests((req, res) => {
      (req as IncomingMessage & { rawBody: string }).rawBody = String(req.headers["x-raw-body"]);
      try {
        middleware(req, res, () => {
          throw new Error("the route failed");
        }).catch(() => res.writeHead(500).end());
      } catch {
        threwSynchronously = true;
        res.writeHead(500).end();
      }
    });
    const { body } = await delivery(SECRET);
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      method: "POST",
      headers: { "service-signature": await sign(body), "x-raw-body": body },
    });
    expect(response.status).toBe(500);
    expect(threwSynchronously).toBe(false);
  });
});

describe("the Express middleware's promise contract, with onEvent", () => {
  it("rejects its returned Promise, never throws, when reading the request throws (a rawBody getter)", async () => {
    const middleware = webhookMiddleware({ secret, onEvent: () => {} });
    let threwSynchronously = false;
    const port = await serveRequests((req, res) => {
      Object.defineProperty(req, "rawBody", {
        get() {
          throw new Error("a framework's rawBody getter failed");
        },
      });
      try {
        middleware(req, res, () => {}).catch(() => res.writeHead(500).end());
      } catch {
        threwSynchronously = true;
        res.writeHead(500).end();
      }
    });
    const { body } = await delivery(SECRET);
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      method: "POST",
      headers: { "service-signature": await sign(body) },
      body,
    });
    expect(response.status).toBe(500);
    expect(threwSynchronously).toBe(false);
  });
});

describe("the Express middleware's promises", () => {
  it("gives each request a promise of its own on the synchronous path", async () => {
    const middleware = webhookMiddleware({ secret });
    const returned: Promise<void>[] = [];
    const port = await serveRequests((req, res) => {
      (req as IncomingMessage & { rawBody: string }).rawBody = String(req.headers["x-raw-body"]);
      returned.push(middleware(req, res, () => res.writeHead(204).end()));
    });
    for (let i = 0; i < 2; i++) {
      const { body } = await delivery(SECRET);
      const response = await fetch(`http://127.0.0.1:${port}/`, {
        method: "POST",
        headers: { "service-signature": await sign(body), "x-raw-body": body },
      });
      expect(response.status).toBe(204);
    }
    expect(returned).toHaveLength(2);
    expect(returned[0]).toBeInstanceOf(Promise);
    expect(returned[0]).not.toBe(returned[1]);
  });
});

describe("a (req, res) function with onEvent needs no next (Next.js pages, Vercel, plain node:http)", () => {
  const serve = serverPerTest();

  it("answers the delivery itself when called with req and res alone", async () => {
    const seen: string[] = [];
    const handler = webhookMiddleware({ secret: "no-next", onEvent: (event) => void seen.push(event.type) });
    const server = await serve(createServer((req, res) => void handler(req, res)));
    expect((await post(server, await delivery("no-next"))).status).toBe(204);
    expect(seen).toEqual(["flag.updated"]);
  });

  it("without onEvent, refuses to run with no next, before reading the request, saying why", async () => {
    const handler = webhookMiddleware({ secret: "no-next" });
    let refused: unknown;
    const server = await serve(
      createServer((req, res) => {
        void handler(req, res).catch((error: unknown) => {
          refused = error;
          res.statusCode = 500;
          res.end();
        });
      }),
    );
    expect((await post(server, await delivery("no-next"))).status).toBe(500);
    expect(refused).toEqual(
      new TypeError("flag-webhooks: webhookMiddleware without onEvent needs next() to hand the event to a route"),
    );
  });
});
