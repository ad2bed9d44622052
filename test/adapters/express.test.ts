import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import express, { type NextFunction, type Request, type Response } from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import supertest from "supertest";
import { afterEach, describe, expect, it, vi } from "vitest";
import { close, listen } from "../support/http.js";
import { vector } from "../support/vectors.js";

const { secret, body, signature } = vector("flag-updated-compact");
const pretty = vector("flag-updated-pretty");
const sign = (bytes: Buffer | string) => createHmac("sha256", secret).update(bytes).digest("hex");

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

let server: Server | undefined;
afterEach(() => close(server));

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
      .set("service-signature", sign(big))
      .send(big);
    expect([res.status, res.body.error.code]).toEqual([413, "payload_too_large"]);
  });

  it("takes the limit as a size string: 2kb passes 2048 bytes and refuses 2049", async () => {
    const event = Buffer.concat([body, Buffer.alloc(2048 - body.length, " ")]);
    const { application } = app([], { secret, limit: "2kb" });
    const ok = await supertest(application).post("/webhooks").set("service-signature", sign(event)).send(event);
    expect(ok.status).toBe(200);
    const over = Buffer.concat([event, Buffer.from(" ")]);
    const res = await supertest(application).post("/webhooks").set("service-signature", sign(over)).send(over);
    expect(res.status).toBe(413);
  });

  it("answers 413 at once when Content-Length announces more than the limit, without waiting for the body", async () => {
    const { application } = app([], { secret, limit: 1024 });
    server = await listen(createServer(application));
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
    server = await listen(createServer(application));
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
    server = await listen(
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
    server = await listen(
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
