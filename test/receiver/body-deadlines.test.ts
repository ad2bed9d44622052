import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { WebhookError } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import type { SignedDelivery } from "flag-webhooks/testing";
import { afterEach, describe, expect, it, vi } from "vitest";
import { delivery, signatureOf } from "../support/deliveries.js";
import { serverPerTest } from "../support/http.js";

// How the Node adapters read a request body (src/node/read-body.ts), seen from outside: a real
// node:http server with the Express middleware, and raw sockets that send part of a body and
// then stall, hang up, or are cut by the app. What a refusal says (its code, message and cause,
// as the answer and the onRejected hook get them), the limit, and the deadlines: one timer per
// body timeout for all the bodies in flight, not one per request, yet each body gets its own
// full timeout, however many are in flight and in whatever order they end, and no finished body
// is kept (nor the process alive) by a deadline.

const SECRET = "whsec_body_deadlines";

const serve = serverPerTest();
const sockets: Socket[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
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

/** A node:http server with the Express middleware (`bodyTimeout`, and `limit` if given), answering 204. */
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
  const server = await serve(
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

/** A server of node:http requests answered by `handler`; its port. */
async function serveRequests(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  return ((await serve(createServer(handler))).address() as { port: number }).port;
}

interface Raw {
  /** The answer's status code, or 0 when the connection closed without one. */
  status: Promise<number>;
  /** When the status line arrived (performance.now()), or when the socket closed without one. */
  at: Promise<number>;
  /** The whole answer, once the connection closed. */
  answer: Promise<string>;
  write(text: string): void;
  /** The client hangs up. */
  hangUp(): void;
}

/** A raw HTTP/1.1 client: the head and `first` part of a body now, the rest whenever (or never). */
function raw(port: number, head: string, first = ""): Raw {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.write(`${head}\r\n${first}`);
  let text = "";
  const status = new Promise<{ status: number; at: number }>((done) => {
    socket.on("data", (chunk) => {
      text += chunk;
      const match = /^HTTP\/1\.1 (\d{3}) /.exec(text);
      if (match) done({ status: Number(match[1]), at: performance.now() });
    });
    socket.on("error", () => done({ status: 0, at: performance.now() }));
    socket.on("close", () => done({ status: 0, at: performance.now() }));
  });
  const answer = new Promise<string>((done) => {
    socket.on("close", () => done(text));
    socket.on("error", () => done(text));
  });
  return {
    status: status.then((a) => a.status),
    at: status.then((a) => a.at),
    answer,
    write: (part) => socket.write(part),
    hangUp: () => socket.destroy(),
  };
}

/** Signed deliveries made ahead, so that sending them takes no time a deadline would count. */
const deliveries = (count: number) => Promise.all(Array.from({ length: count }, () => delivery(SECRET)));

/** A signed delivery sent with its Content-Length, of which only the first half goes out now. */
function halfSent(port: number, d: SignedDelivery, path = "/webhooks"): Raw & { finish(): void } {
  const split = Math.floor(d.body.length / 2);
  const client = raw(
    port,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${d.headers["content-type"]}\r\n` +
      `Service-Signature: ${d.headers["service-signature"]}\r\nContent-Length: ${Buffer.byteLength(d.body)}\r\n` +
      `Connection: close\r\n`,
    d.body.slice(0, split),
  );
  return { ...client, finish: () => client.write(d.body.slice(split)) };
}

/** setTimeout calls asking for at most 1 ms (or NaN, which Node runs as 1 ms): a timer polling. */
function pollingTimers(spy: { mock: { calls: unknown[][] } }): number {
  return spy.mock.calls.filter(([, ms]) => typeof ms === "number" && (Number.isNaN(ms) || ms <= 1)).length;
}

/** Runs `script` (an ES module) in a child Node with tsx; what it printed, and how it exited. */
async function runScript(
  script: string,
  ms: number,
): Promise<{ out: string; code: number | null; signal: string | null }> {
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  const killer = setTimeout(() => child.kill("SIGKILL"), ms);
  const [code, signal] = await new Promise<[number | null, string | null]>((done) =>
    child.on("exit", (exitCode, exitSignal) => done([exitCode, exitSignal])),
  );
  clearTimeout(killer);
  return { out: out.trim(), code, signal };
}

describe("reading a Node request body", () => {
  it("refuses a stalled body with body_timeout, and says how long it waited", async () => {
    const started = await start(250);
    const text = await halfSent(started.port, await delivery(SECRET)).answer;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    const expected = { code: "body_timeout", message: "the request body did not arrive within 250 ms" };
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toEqual({ error: expected });
    expect(started.rejected.map((e) => ({ code: e.code, message: e.message }))).toEqual([expected]);
  });

  it("refuses a body the client hung up on as invalid_payload, with the connection's reset as its cause", async () => {
    const started = await start(5_000);
    const refused = started.nextRejection();
    const client = halfSent(started.port, await delivery(SECRET));
    // The server has the first half once the request is there; then the client goes away.
    while (started.requests.length === 0) await sleep(10);
    await sleep(50);
    client.hangUp();
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
    halfSent(started.port, await delivery(SECRET));
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
    const d = await delivery(SECRET);
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      expect(await halfSent(started.port, d).answer).toMatch(/^HTTP\/1\.1 408 /);
      await sleep(200);
      expect(pollingTimers(setTimer)).toBeLessThanOrEqual(5);
    } finally {
      setTimer.mockRestore();
    }
  });

  it("between two stalled bodies, waits for the next one to be due instead of polling", async () => {
    const started = await start(270);
    const [a, b] = (await deliveries(2)) as [SignedDelivery, SignedDelivery];
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      const first = halfSent(started.port, a);
      await sleep(150);
      const second = halfSent(started.port, b);
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
    /** A signed delivery's head, with the Content-Length given (or chunked), then `rest`: the whole answer. */
    function send(port: number, signature: string, length: number | "chunked", rest: string): Promise<string> {
      const framing = length === "chunked" ? "Transfer-Encoding: chunked" : `Content-Length: ${length}`;
      const head =
        `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Service-Signature: ${signature}\r\n${framing}\r\nConnection: close\r\n`;
      return raw(port, head, rest).answer;
    }

    it("refuses a body announcing one byte over the limit at once, before any of it arrives", async () => {
      const { body, headers } = await delivery(SECRET);
      const limit = Buffer.byteLength(body);
      // A body timeout far longer than the test: only the announced length can refuse it in time.
      const started = await start(2_000, limit);
      const text = await send(started.port, String(headers["service-signature"]), limit + 1, "");
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(started.rejected.map((e) => e.code)).toEqual(["payload_too_large"]);
    });

    it("reads a body of exactly the limit, announced by its Content-Length or sent in chunks", async () => {
      const { body, headers } = await delivery(SECRET);
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

const TIMEOUT = 300;

describe("body timeouts with many bodies in flight", () => {
  it("gives every stalled body its own full timeout, oldest first", async () => {
    const port = (await start(TIMEOUT)).port;
    const [first, second] = (await deliveries(2)) as [SignedDelivery, SignedDelivery];
    const startedA = performance.now();
    const a = halfSent(port, first);
    await sleep(TIMEOUT / 2);
    const startedB = performance.now();
    const b = halfSent(port, second);
    expect(await a.status).toBe(408);
    expect(await b.status).toBe(408);
    // Never early: each one waited at least its own timeout from the moment it was sent (the
    // server saw it later still). B is not cut when A's time runs out.
    expect((await a.at) - startedA).toBeGreaterThanOrEqual(TIMEOUT - 5);
    expect((await b.at) - startedB).toBeGreaterThanOrEqual(TIMEOUT - 5);
    expect(await b.at).toBeGreaterThan(await a.at);
  });

  it("lets a body that ends in time pass, while older and newer ones time out", async () => {
    const port = (await start(TIMEOUT)).port;
    const [before, during, after] = (await deliveries(3)) as [SignedDelivery, SignedDelivery, SignedDelivery];
    const stalledBefore = halfSent(port, before);
    await sleep(20);
    const slow = halfSent(port, during);
    await sleep(20);
    const stalledAfter = halfSent(port, after);
    // The slow one finishes well before its timeout; it was neither the oldest nor the newest.
    await sleep(TIMEOUT / 3);
    slow.finish();
    expect(await slow.status).toBe(204);
    expect(await stalledBefore.status).toBe(408);
    expect(await stalledAfter.status).toBe(408);
  });

  it("still times bodies out after the first ones finished and the list was empty", async () => {
    const port = (await start(TIMEOUT)).port;
    for (let round = 0; round < 2; round++) {
      const quick = halfSent(port, await delivery(SECRET));
      quick.finish();
      expect(await quick.status).toBe(204);
      const stalled = halfSent(port, await delivery(SECRET));
      expect(await stalled.status).toBe(408);
    }
  });

  it("times any number of bodies in flight with one timer", async () => {
    const port = (await start(TIMEOUT)).port;
    // Timers of the body timeout's length, set while 20 bodies are being read. (Unreferenced
    // timers are not in process.getActiveResourcesInfo(), so the calls are counted instead.)
    const made = await deliveries(20);
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      const stalled = made.map((d) => halfSent(port, d));
      await sleep(TIMEOUT / 3);
      const bodyTimers = setTimer.mock.calls.filter(([, ms]) => ms === TIMEOUT).length;
      expect(bodyTimers).toBeLessThanOrEqual(1);
      for (const body of stalled) expect(await body.status).toBe(408);
    } finally {
      setTimer.mockRestore();
    }
  });

  it("keeps no process alive once the bodies are read: a script that closes its server exits", async () => {
    // With a 60 s bodyTimeout, a timer that held the process would keep it for a minute.
    const body = JSON.stringify({
      id: "evt_1",
      type: "rollout.step",
      createdAt: new Date().toISOString(),
      environment: "p",
      data: {},
    });
    const script = `
      import { createServer, request } from "node:http";
      import { webhookMiddleware } from ${JSON.stringify(resolve("src/adapters/express.ts"))};
      const middleware = webhookMiddleware({ secret: "s3cret-long", bodyTimeout: 60_000 });
      const server = createServer((req, res) => void middleware(req, res, () => res.writeHead(204).end()));
      server.listen(0, "127.0.0.1", () => {
        const body = ${JSON.stringify(body)};
        const req = request({ port: server.address().port, host: "127.0.0.1", method: "POST", agent: false,
          headers: { "service-signature": ${JSON.stringify(await signatureOf("s3cret-long", body))}, "content-length": Buffer.byteLength(body) } }, (res) => {
          console.log(res.statusCode);
          res.resume();
          res.on("end", () => server.close());
        });
        req.end(body);
      });`;
    expect(await runScript(script, 30_000)).toEqual({ out: "204", code: 0, signal: null });
  }, 40_000);
});

describe("body timeouts: one timer per timeout, many bodies, any order", () => {
  const SHORT = 120;
  const LONG = 360;

  /** One server, two receivers with different bodyTimeouts (and a small limit), by path. */
  async function twoTimeouts(): Promise<number> {
    const ok = (_req: IncomingMessage, res: ServerResponse) => () => res.writeHead(204).end();
    const short = webhookMiddleware({ secret: SECRET, bodyTimeout: SHORT, limit: 4096 });
    const long = webhookMiddleware({ secret: SECRET, bodyTimeout: LONG, limit: 4096 });
    return serveRequests((req, res) => {
      void (req.url === "/short" ? short : long)(req, res, ok(req, res));
    });
  }

  it("holds each stalled body to its own receiver's timeout while others end, fail or hang up in between", async () => {
    const port = await twoTimeouts();
    const [a, b, c, d] = (await deliveries(4)) as [SignedDelivery, SignedDelivery, SignedDelivery, SignedDelivery];
    const sent = performance.now();
    const stalledLong = halfSent(port, a, "/long");
    const stalledShort = halfSent(port, b, "/short");
    const finishedLong = halfSent(port, c, "/long");
    const hungUpShort = halfSent(port, d, "/short");
    // A chunked body that goes past the limit mid-stream: 413, its deadline dropped.
    const tooLarge = raw(
      port,
      `POST /short HTTP/1.1\r\nHost: x\r\nService-Signature: ${"a".repeat(64)}\r\nTransfer-Encoding: chunked\r\n`,
      "10\r\n0123456789abcdef\r\n",
    );
    await sleep(10);
    tooLarge.write(`1400\r\n${"x".repeat(0x1400)}\r\n`);
    hungUpShort.hangUp();
    await sleep(SHORT / 2);
    finishedLong.finish();
    expect(await tooLarge.status).toBe(413);
    expect(await finishedLong.status).toBe(204);
    expect(await hungUpShort.status).toBe(0);

    expect(await stalledShort.status).toBe(408);
    expect(await stalledLong.status).toBe(408);
    const short = (await stalledShort.at) - sent;
    const long = (await stalledLong.at) - sent;
    // Never before its own timeout (the timer's millisecond granularity aside), and not held for
    // the other receiver's: the short one is answered first. An order, not a bound in ms: a loaded
    // machine can stall both timers alike, and the short one's still fires first.
    expect(short).toBeGreaterThanOrEqual(SHORT - 2);
    expect(short).toBeLessThan(long);
    expect(long).toBeGreaterThanOrEqual(LONG - 2);

    // The timers of both timeouts are still alive for bodies that come after all of that.
    const next = await delivery(SECRET);
    const later = performance.now();
    const again = halfSent(port, next, "/short");
    expect(await again.status).toBe(408);
    expect((await again.at) - later).toBeGreaterThanOrEqual(SHORT - 2);
  });

  it("times out a burst of bodies due in the same millisecond, none early, none forgotten", async () => {
    const port = await twoTimeouts();
    const made = await deliveries(25);
    const sent = performance.now();
    const burst = made.map((d) => halfSent(port, d, "/short"));
    // One of the burst finishes in time: the expiry sweep must skip nothing around it.
    burst[12]?.finish();
    const statuses = await Promise.all(burst.map((b) => b.status));
    expect(statuses.filter((s) => s === 408)).toHaveLength(24);
    expect(statuses[12]).toBe(204);
    const times = await Promise.all(burst.filter((_, i) => i !== 12).map((b) => b.at));
    for (const at of times) expect(at - sent).toBeGreaterThanOrEqual(SHORT - 2);
  });

  it("keeps no finished body in its deadline list: bodies that hung up, went over the limit or ended are collected", async () => {
    // With a 60 s timeout, a deadline left in the list holds its request (through its expire
    // closure) until it is due; every request here must be collectable at once.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const middleware = webhookMiddleware({ secret: SECRET, bodyTimeout: 60_000, limit: 100 });
    const requests: WeakRef<IncomingMessage>[] = [];
    const port = await serveRequests((req, res) => {
      requests.push(new WeakRef(req));
      void middleware(req, res, () => res.writeHead(204).end());
    });
    const head = `POST / HTTP/1.1\r\nHost: x\r\nService-Signature: ${"a".repeat(64)}\r\n`;
    for (let round = 0; round < 3; round++) {
      const hungUp = raw(port, `${head}Content-Length: 50\r\n`, '{"a":');
      await sleep(20);
      hungUp.hangUp();
      const tooLarge = raw(port, `${head}Transfer-Encoding: chunked\r\n`, "5\r\nhello\r\n");
      await sleep(10);
      tooLarge.write(`c8\r\n${"x".repeat(200)}\r\n`);
      expect(await tooLarge.status).toBe(413);
      tooLarge.hangUp();
      const ended = raw(port, `${head}Content-Length: 2\r\n`, "{}");
      expect(await ended.status).toBe(401);
      ended.hangUp();
    }
    await sleep(50);
    for (let i = 0; i < 4; i++) {
      gc();
      await sleep(10);
    }
    expect(requests).toHaveLength(9);
    expect(requests.map((ref) => (ref.deref() === undefined ? "collected" : "kept"))).toEqual(
      Array(9).fill("collected"),
    );
  });

  it("lets a script exit whose only body in flight was abandoned by its client", async () => {
    // The deadline of a body that failed (client gone) must not hold the process: 60 s timeout.
    const script = `
      import { createServer } from "node:http";
      import { connect } from "node:net";
      import { webhookMiddleware } from ${JSON.stringify(resolve("src/adapters/express.ts"))};
      const middleware = webhookMiddleware({ secret: "s3cret-long", bodyTimeout: 60_000 });
      const server = createServer((req, res) => {
        req.on("close", () => server.close(() => console.log("closed")));
        void middleware(req, res, () => res.writeHead(204).end());
      });
      server.listen(0, "127.0.0.1", () => {
        const socket = connect(server.address().port, "127.0.0.1", () => {
          socket.write("POST / HTTP/1.1\\r\\nHost: x\\r\\nService-Signature: ${"a".repeat(64)}\\r\\nContent-Length: 100\\r\\n\\r\\n{\\"id\\":");
          setTimeout(() => socket.destroy(), 50);
        });
      });`;
    expect(await runScript(script, 20_000)).toEqual({ out: "closed", code: 0, signal: null });
  }, 30_000);
});
