import { spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { resolve } from "node:path";
import { webhookMiddleware } from "flag-webhooks/express";
import { afterEach, describe, expect, it, vi } from "vitest";
import { close, listen } from "../support/http.js";
import { signedDelivery } from "../support/signed-delivery.js";

// The Node adapters time bodies with one timer per timeout for all bodies in flight, not one per
// request (src/node/read-body.ts). These cases hold what a timer per request gave for free: each
// body gets its own full timeout, however many are in flight and in whatever order they end.

const SECRET = "whsec_deadlines";
const TIMEOUT = 300;

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

async function start(): Promise<number> {
  const middleware = webhookMiddleware({ secret: SECRET, bodyTimeout: TIMEOUT });
  server = await listen(
    createServer((req, res) => {
      void middleware(req, res, () => {
        res.statusCode = 204;
        res.end();
      });
    }),
  );
  return (server.address() as { port: number }).port;
}

interface Sent {
  /** The status line's code, once the server answered and closed or ended. */
  status: Promise<number>;
  /** When the answer came, in performance.now() ms. */
  answeredAt: Promise<number>;
  /** Sends the rest of the body. */
  finish(): void;
}

/** A delivery whose body is sent in two parts: the first now, the rest on finish(). */
function sendInTwoParts(port: number): Sent {
  const { body, headers } = signedDelivery(SECRET);
  const split = Math.floor(body.length / 2);
  const socket = connect(port, "127.0.0.1");
  socket.write(
    `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: ${headers["content-type"]}\r\n` +
      `Service-Signature: ${headers["service-signature"]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body.slice(0, split)}`,
  );
  let text = "";
  const answered = new Promise<{ status: number; at: number }>((resolve, reject) => {
    socket.on("data", (chunk) => {
      text += chunk;
      const match = /^HTTP\/1\.1 (\d{3}) /.exec(text);
      if (match) resolve({ status: Number(match[1]), at: performance.now() });
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error(`closed without an answer: ${JSON.stringify(text)}`)));
  });
  return {
    status: answered.then((a) => a.status),
    answeredAt: answered.then((a) => a.at),
    finish: () => socket.end(body.slice(split)),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("body timeouts with many bodies in flight", () => {
  it("gives every stalled body its own full timeout, oldest first", async () => {
    const port = await start();
    const startedA = performance.now();
    const a = sendInTwoParts(port);
    await sleep(TIMEOUT / 2);
    const startedB = performance.now();
    const b = sendInTwoParts(port);
    expect(await a.status).toBe(408);
    expect(await b.status).toBe(408);
    // Never early: each one waited at least its own timeout from the moment it was sent (the
    // server saw it later still). B is not cut when A's time runs out.
    expect((await a.answeredAt) - startedA).toBeGreaterThanOrEqual(TIMEOUT - 5);
    expect((await b.answeredAt) - startedB).toBeGreaterThanOrEqual(TIMEOUT - 5);
    expect(await b.answeredAt).toBeGreaterThan(await a.answeredAt);
  });

  it("lets a body that ends in time pass, while older and newer ones time out", async () => {
    const port = await start();
    const stalledBefore = sendInTwoParts(port);
    await sleep(20);
    const slow = sendInTwoParts(port);
    await sleep(20);
    const stalledAfter = sendInTwoParts(port);
    // The slow one finishes well before its timeout; it was neither the oldest nor the newest.
    await sleep(TIMEOUT / 3);
    slow.finish();
    expect(await slow.status).toBe(204);
    expect(await stalledBefore.status).toBe(408);
    expect(await stalledAfter.status).toBe(408);
  });

  it("still times bodies out after the first ones finished and the list was empty", async () => {
    const port = await start();
    for (let round = 0; round < 2; round++) {
      const quick = sendInTwoParts(port);
      quick.finish();
      expect(await quick.status).toBe(204);
      const stalled = sendInTwoParts(port);
      expect(await stalled.status).toBe(408);
    }
  });

  it("times any number of bodies in flight with one timer", async () => {
    const port = await start();
    // Timers of the body timeout's length, set while 20 bodies are being read. (Unreferenced
    // timers are not in process.getActiveResourcesInfo(), so the calls are counted instead.)
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      const stalled = Array.from({ length: 20 }, () => sendInTwoParts(port));
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
    const script = `
      import { createServer, request } from "node:http";
      import { createHmac } from "node:crypto";
      import { webhookMiddleware } from ${JSON.stringify(resolve("src/adapters/express.ts"))};
      const middleware = webhookMiddleware({ secret: "s3cret-long", bodyTimeout: 60_000 });
      const server = createServer((req, res) => void middleware(req, res, () => res.writeHead(204).end()));
      server.listen(0, "127.0.0.1", () => {
        const body = JSON.stringify({ id: "evt_1", type: "rollout.step", createdAt: new Date().toISOString(), environment: "p", data: {} });
        const signature = createHmac("sha256", "s3cret-long").update(body).digest("hex");
        const req = request({ port: server.address().port, host: "127.0.0.1", method: "POST", agent: false,
          headers: { "service-signature": signature, "content-length": Buffer.byteLength(body) } }, (res) => {
          console.log(res.statusCode);
          res.resume();
          res.on("end", () => server.close());
        });
        req.end(body);
      });`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const [code, signal] = await new Promise<[number | null, string | null]>((done) =>
      child.on("exit", (exitCode, exitSignal) => done([exitCode, exitSignal])),
    );
    clearTimeout(killer);
    expect(out.trim()).toBe("204");
    expect(signal).toBeNull();
    expect(code).toBe(0);
  }, 40_000);
});
