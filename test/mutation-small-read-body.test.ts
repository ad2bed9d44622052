import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import type { WebhookError } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { afterEach, describe, expect, it, vi } from "vitest";
import { close, listen } from "./support/http.js";
import { signedDelivery } from "./support/signed-delivery.js";

// How the Node adapters read a body from the stream (src/node/read-body.ts), seen from outside: a
// real node:http server with the Express middleware, and raw sockets that send part of a body and
// then stall, hang up, or are cut by the app. What is checked is what the refusal says (its code,
// message and cause, as the answer and the onRejected hook get them) and how the one shared body
// timer behaves (counted setTimeout calls, never durations).

const SECRET = "whsec_small_read_body";
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

let server: Server | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await close(server);
  server = undefined;
});

interface Started {
  port: number;
  /** Every refusal, as the onRejected hook got it. */
  rejected: WebhookError[];
  /** Resolves with the next refusal. */
  nextRejection(): Promise<WebhookError>;
  /** The requests the server got, in order. */
  requests: IncomingMessage[];
}

async function start(bodyTimeout: number, limit?: number): Promise<Started> {
  const rejected: WebhookError[] = [];
  const waiting: ((error: WebhookError) => void)[] = [];
  const requests: IncomingMessage[] = [];
  const middleware = webhookMiddleware({
    secret: SECRET,
    bodyTimeout,
    ...(limit === undefined ? {} : { limit }),
    onRejected(error) {
      rejected.push(error);
      for (const done of waiting.splice(0)) done(error);
    },
  });
  server = await listen(
    createServer((req, res) => {
      requests.push(req);
      void middleware(req, res, () => res.writeHead(204).end());
    }),
  );
  return {
    port: (server.address() as { port: number }).port,
    rejected,
    requests,
    nextRejection: () => new Promise((done) => waiting.push(done)),
  };
}

/** Sends the head and the first half of a signed delivery, and collects what comes back. */
function sendHalf(port: number): { socket: Socket; answer: Promise<string> } {
  const { body, headers } = signedDelivery(SECRET);
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.write(
    `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: ${headers["content-type"]}\r\n` +
      `Service-Signature: ${headers["service-signature"]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body.slice(0, Math.floor(body.length / 2))}`,
  );
  let text = "";
  socket.on("data", (chunk) => {
    text += chunk;
  });
  const answer = new Promise<string>((done) => {
    socket.on("close", () => done(text));
    socket.on("error", () => done(text));
  });
  return { socket, answer };
}

/** setTimeout calls asking for at most 1 ms (or NaN, which Node runs as 1 ms): a timer polling. */
function pollingTimers(spy: { mock: { calls: unknown[][] } }): number {
  return spy.mock.calls.filter(([, ms]) => typeof ms === "number" && (Number.isNaN(ms) || ms <= 1)).length;
}

describe("reading a Node request body", () => {
  it("refuses a stalled body with body_timeout, and says how long it waited", async () => {
    const started = await start(250);
    const { answer } = sendHalf(started.port);
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    const expected = { code: "body_timeout", message: "the request body did not arrive within 250 ms" };
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toEqual({ error: expected });
    expect(started.rejected.map((e) => ({ code: e.code, message: e.message }))).toEqual([expected]);
  });

  it("refuses a body the client hung up on as invalid_payload, with the connection's reset as its cause", async () => {
    const started = await start(5_000);
    const refused = started.nextRejection();
    const { socket } = sendHalf(started.port);
    // The server has the first half once the request is there; then the client goes away.
    while (started.requests.length === 0) await sleep(10);
    await sleep(50);
    socket.destroy();
    const error = await refused;
    expect(error.code).toBe("invalid_payload");
    expect(error.message).toBe("the request body was not fully received");
    // Node's own error for an aborted request, kept for whoever logs the refusal.
    expect(error.cause).toBeInstanceOf(Error);
    expect((error.cause as NodeJS.ErrnoException).code).toBe("ECONNRESET");
  });

  it("refuses at once, as invalid_payload, a request the app destroys mid-body without an error", async () => {
    // Something else on the server (a rate limiter, the app's own guard) calls req.destroy() with
    // no error: Node then emits only 'close'. The refusal comes at once, not at the body timeout.
    const started = await start(3_000);
    const refused = started.nextRejection();
    sendHalf(started.port);
    while (started.requests.length === 0) await sleep(10);
    await sleep(50);
    started.requests[0]?.destroy();
    const error = await refused;
    expect(error.code).toBe("invalid_payload");
    expect(error.cause).toBeUndefined();
  });

  it("once the last body in flight is refused, leaves no timer polling behind", async () => {
    // A timeout no other test uses: the bodies under it share a clock of their own.
    const started = await start(230);
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      const { answer } = sendHalf(started.port);
      expect(await answer).toMatch(/^HTTP\/1\.1 408 /);
      await sleep(200);
      expect(pollingTimers(setTimer)).toBeLessThanOrEqual(5);
    } finally {
      setTimer.mockRestore();
    }
  });

  it("between two stalled bodies, waits for the next one to be due instead of polling", async () => {
    const started = await start(270);
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      const first = sendHalf(started.port);
      await sleep(150);
      const second = sendHalf(started.port);
      expect(await first.answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(await second.answer).toMatch(/^HTTP\/1\.1 408 /);
      // One timer for the first body, one re-armed for the second when the first expired, and
      // at most a 1 ms one per body when its timer fires a little before performance.now() says due.
      expect(pollingTimers(setTimer)).toBeLessThanOrEqual(5);
      expect(started.rejected.map((e) => e.code)).toEqual(["body_timeout", "body_timeout"]);
    } finally {
      setTimer.mockRestore();
    }
  });

  describe("at the limit", () => {
    /** Sends a signed delivery's head, with the Content-Length given (or chunked), then `rest`, and collects the answer. */
    function send(port: number, signature: string, length: number | "chunked", rest: string) {
      const socket = connect(port, "127.0.0.1");
      sockets.push(socket);
      const framing = length === "chunked" ? "Transfer-Encoding: chunked" : `Content-Length: ${length}`;
      socket.write(
        `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Service-Signature: ${signature}\r\n${framing}\r\nConnection: close\r\n\r\n${rest}`,
      );
      let text = "";
      socket.on("data", (chunk) => {
        text += chunk;
      });
      return new Promise<string>((done) => {
        socket.on("close", () => done(text));
        socket.on("error", () => done(text));
      });
    }

    it("refuses a body announcing one byte over the limit at once, before any of it arrives", async () => {
      const { body, headers } = signedDelivery(SECRET);
      const limit = Buffer.byteLength(body);
      // A body timeout far longer than the test: only the announced length can refuse it in time.
      const started = await start(2_000, limit);
      const text = await send(started.port, String(headers["service-signature"]), limit + 1, "");
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(started.rejected.map((e) => e.code)).toEqual(["payload_too_large"]);
    });

    it("reads a body of exactly the limit, announced by its Content-Length or sent in chunks", async () => {
      const { body, headers } = signedDelivery(SECRET);
      const limit = Buffer.byteLength(body);
      const started = await start(2_000, limit);
      const announced = await send(started.port, String(headers["service-signature"]), limit, body);
      expect(announced).toMatch(/^HTTP\/1\.1 204 /);
      const half = Math.floor(body.length / 2);
      const chunks = [body.slice(0, half), body.slice(half)]
        .map((part) => `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`)
        .join("");
      const chunked = await send(started.port, String(headers["service-signature"]), "chunked", `${chunks}0\r\n\r\n`);
      expect(chunked).toMatch(/^HTTP\/1\.1 204 /);
      expect(started.rejected).toEqual([]);
    });
  });
});
