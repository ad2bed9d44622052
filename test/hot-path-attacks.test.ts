import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { resolve } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { MemoryDedupeStore, parseEvent, verifySignature } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { afterEach, describe, expect, it } from "vitest";
import { backends } from "./support/backends.js";
import { close, listen } from "./support/http.js";
import { signedDelivery } from "./support/signed-delivery.js";

// Hostile cases for the hot path of issue 20 (part 2): the receiver and the Express middleware
// answering synchronously what they can, one body timer per timeout, the Node HMAC compared in
// two kept buffers, verifySignature returning shared settled promises, createdAt read from char
// codes. Everything goes through the public API, over real sockets where a client misbehaves.

const SECRET = "whsec_hot_path";
const mac = (secret: string, body: string | Uint8Array) => createHmac("sha256", secret).update(body).digest("hex");
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

let servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.map((server) => close(server)));
  servers = [];
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  const server = await listen(createServer(handler));
  servers.push(server);
  return (server.address() as { port: number }).port;
}

interface Raw {
  /** The answer's status code, or 0 when the connection closed without one. */
  status: Promise<number>;
  /** When the status line arrived (performance.now()), or when the socket closed without one. */
  at: Promise<number>;
  write(text: string): void;
  /** The client hangs up. */
  hangUp(): void;
}

/** A raw HTTP/1.1 client: the head and `first` part of a body now, the rest whenever (or never). */
function raw(port: number, head: string, first = ""): Raw {
  const socket = connect(port, "127.0.0.1");
  socket.write(`${head}\r\n${first}`);
  let text = "";
  const answer = new Promise<{ status: number; at: number }>((done) => {
    socket.on("data", (chunk) => {
      text += chunk;
      const match = /^HTTP\/1\.1 (\d{3}) /.exec(text);
      if (match) done({ status: Number(match[1]), at: performance.now() });
    });
    socket.on("error", () => done({ status: 0, at: performance.now() }));
    socket.on("close", () => done({ status: 0, at: performance.now() }));
  });
  return {
    status: answer.then((a) => a.status),
    at: answer.then((a) => a.at),
    write: (part) => socket.write(part),
    hangUp: () => socket.destroy(),
  };
}

/** A signed delivery sent with a Content-Length, of which only the first half goes out now. */
function halfSent(port: number, path: string): Raw & { finish(): void } {
  const { body, headers } = signedDelivery(SECRET);
  const split = Math.floor(body.length / 2);
  const client = raw(
    port,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nService-Signature: ${headers["service-signature"]}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n`,
    body.slice(0, split),
  );
  return { ...client, finish: () => client.write(body.slice(split)) };
}

describe("body timeouts: one timer per timeout, many bodies, any order", () => {
  const SHORT = 120;
  const LONG = 360;

  /** One server, two receivers with different bodyTimeouts (and a small limit), by path. */
  async function twoTimeouts(): Promise<number> {
    const ok = (_req: IncomingMessage, res: ServerResponse) => () => res.writeHead(204).end();
    const short = webhookMiddleware({ secret: SECRET, bodyTimeout: SHORT, limit: 4096 });
    const long = webhookMiddleware({ secret: SECRET, bodyTimeout: LONG, limit: 4096 });
    return serve((req, res) => {
      void (req.url === "/short" ? short : long)(req, res, ok(req, res));
    });
  }

  it("holds each stalled body to its own receiver's timeout while others end, fail or hang up in between", async () => {
    const port = await twoTimeouts();
    const sent = performance.now();
    const stalledLong = halfSent(port, "/long");
    const stalledShort = halfSent(port, "/short");
    const finishedLong = halfSent(port, "/long");
    const hungUpShort = halfSent(port, "/short");
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
    // the other receiver's: the short one is not kept until the long one is due.
    expect(short).toBeGreaterThanOrEqual(SHORT - 2);
    expect(short).toBeLessThan(LONG - 60);
    expect(long).toBeGreaterThanOrEqual(LONG - 2);

    // The timers of both timeouts are still alive for bodies that come after all of that.
    const later = performance.now();
    const again = halfSent(port, "/short");
    expect(await again.status).toBe(408);
    expect((await again.at) - later).toBeGreaterThanOrEqual(SHORT - 2);
  });

  it("times out a burst of bodies due in the same millisecond, none early, none forgotten", async () => {
    const port = await twoTimeouts();
    const sent = performance.now();
    const burst = Array.from({ length: 25 }, () => halfSent(port, "/short"));
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
    const port = await serve((req, res) => {
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
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const [code, signal] = await new Promise<[number | null, string | null]>((done) =>
      child.on("exit", (exitCode, exitSignal) => done([exitCode, exitSignal])),
    );
    clearTimeout(killer);
    expect(out.trim()).toBe("closed");
    expect(signal).toBeNull();
    expect(code).toBe(0);
  }, 30_000);
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
    const port = await serve((req, res) => {
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
      secret: SECRET,
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
      [{ "service-signature": mac(SECRET, good).toUpperCase(), "x-raw-body": good }, "", "POST", 401],
      [{ "service-signature": mac("other", good), "x-raw-body": good }, "", "POST", 401],
      [{ "service-signature": mac(SECRET, "{"), "x-raw-body": "{" }, "", "POST", 400],
      [{ "service-signature": mac(SECRET, stale), "x-raw-body": stale }, "", "POST", 401],
      [{ "service-signature": mac(SECRET, good), "x-raw-body": good.replace("p", "q") }, "", "POST", 401],
      [{ "service-signature": mac(SECRET, good), "x-raw-body": good }, "", "POST", 204],
      [{ "service-signature": mac(SECRET, good) }, good, "POST", 204],
      // The stream was read by something else, and no raw bytes kept: body_already_parsed.
      [{ "service-signature": mac(SECRET, good), "x-consume": "1" }, good, "POST", 500],
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
      secret: SECRET,
      maxAge: 60_000,
      now: () => {
        if (++calls === 1) throw new Error("clock broke");
        return Date.now();
      },
      onError: (error) => errors.push(error),
    });
    const body = event();
    const headers = { "service-signature": mac(SECRET, body), "x-raw-body": body };
    expect(await post(port, headers)).toBe(500);
    expect(await post(port, headers)).toBe(204);
    expect(errors).toHaveLength(1);
    for (const value of seen.returned) expect(value).toBeInstanceOf(Promise);
  });

  it("with dedupe and onEvent, still a Promise, and a repeat on the synchronous body path is a duplicate", async () => {
    const handled: string[] = [];
    const { port, seen } = await start({
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent: (e) => {
        handled.push(e.id);
      },
    });
    const body = event();
    const headers = { "service-signature": mac(SECRET, body), "x-raw-body": body };
    expect(await post(port, headers)).toBe(204);
    const repeat = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers });
    expect(repeat.status).toBe(204);
    expect(repeat.headers.get("webhook-duplicate")).toBe("true");
    expect(handled).toHaveLength(1);
    for (const value of seen.returned) expect(value).toBeInstanceOf(Promise);
  });
});

describe.each(backends)("signatures with $name", ({ load }) => {
  it("finds the index of the secret that signed, in a rotation list, and nothing for a near miss", async () => {
    const core = await load();
    const body = '{"id":"evt_rot"}';
    const secrets = ["newest", "middle", "oldest"];
    for (const secret of secrets) {
      expect(await core.verifySignature({ secret: secrets, payload: body, signature: mac(secret, body) })).toBe(true);
    }
    expect(await core.verifySignature({ secret: secrets, payload: body, signature: mac("other", body) })).toBe(false);
  });

  it("refuses every header that is not exactly 64 lowercase hex characters, whatever its length or alphabet", async () => {
    const core = await load();
    const body = "payload";
    const right = mac(SECRET, body);
    const hostile = [
      right.toUpperCase(),
      right.slice(0, 63),
      `${right}0`,
      `${right.slice(0, 63)}é`,
      `${right.slice(0, 63)}٣`, // an Arabic-Indic digit: \d without the u flag is ASCII only
      `${right.slice(0, 63)}\uff10`, // fullwidth zero
      `${right.slice(0, 62)}\u{1F600}`, // 64 UTF-16 units, 63 characters
      "é".repeat(64), // 64 latin1 characters, none hex
      `${right.slice(0, 63)}\n`,
      ` ${right}`,
      `${right}\n`,
      `sha256=${right}`,
      "",
      [right, right],
      [right],
      undefined,
      null,
    ];
    for (const signature of hostile) {
      expect(await core.verifySignature({ secret: SECRET, payload: body, signature }), JSON.stringify(signature)).toBe(
        false,
      );
      expect(await core.verifySignature({ secret: [SECRET, "x"], payload: body, signature })).toBe(false);
    }
    // And the right one still passes after all of them (nothing stuck in a kept buffer).
    expect(await core.verifySignature({ secret: SECRET, payload: body, signature: right })).toBe(true);
  });

  it("answers each of many interleaved calls for itself (mixed secrets, payload types, verdicts)", async () => {
    const core = await load();
    const calls = Array.from({ length: 300 }, (_, i) => {
      const secret = `secret-${i % 7}`;
      const text = `body ${i} ${"x".repeat(i)}`;
      const payload = i % 3 === 0 ? text : i % 3 === 1 ? new TextEncoder().encode(text) : Buffer.from(text);
      const valid = i % 4 !== 0;
      const signature = valid ? mac(secret, text) : mac(secret, `${text}!`);
      const list = i % 2 === 0 ? secret : ["not-it", secret];
      return { promise: core.verifySignature({ secret: list, payload, signature }), valid };
    });
    const results = await Promise.all(calls.map((c) => c.promise));
    expect(results).toEqual(calls.map((c) => c.valid));
  });

  it("rejects, never throws, whatever the options are", async () => {
    const core = await load();
    const hostile: unknown[] = [
      undefined,
      null,
      42,
      "secret",
      {},
      { secret: SECRET },
      { secret: SECRET, payload: { parsed: true }, signature: "a".repeat(64) },
      { secret: [], payload: "x", signature: "a".repeat(64) },
      { secret: ["ok", 1], payload: "x", signature: "a".repeat(64) },
      {
        get secret() {
          throw new Error("a getter that throws");
        },
      },
      new Proxy(
        {},
        {
          get() {
            throw new Error("a proxy that throws");
          },
        },
      ),
    ];
    for (const options of hostile) {
      let result: Promise<boolean> | undefined;
      expect(() => {
        result = core.verifySignature(options as never);
      }).not.toThrow();
      await expect(result).rejects.toThrow();
    }
  });
});

describe("the receiver reports which secret signed (node:http, real requests)", () => {
  it("gives onVerified the index of the matching secret, for each secret of the list", async () => {
    const secrets = ["newest", "middle", "oldest"];
    const indexes: number[] = [];
    const middleware = webhookMiddleware({
      secret: secrets,
      onVerified: (_event, info) => indexes.push(info.secretIndex),
      onEvent: () => {},
    });
    const port = await serve((req, res) => void middleware(req, res, () => {}));
    for (const secret of [...secrets].reverse()) {
      const { body } = signedDelivery(secret);
      const response = await fetch(`http://127.0.0.1:${port}/`, {
        method: "POST",
        headers: { "service-signature": mac(secret, body) },
        body,
      });
      expect(response.status).toBe(204);
    }
    expect(indexes).toEqual([2, 1, 0]);
  });
});

describe("createdAt read from character codes", () => {
  // The implementation before issue 20, with captures: the new one must agree with it everywhere.
  const TIMESTAMP = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:Z|\+00:00)$/;
  const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  function reference(text: string): boolean {
    const match = TIMESTAMP.exec(text);
    if (!match) return false;
    const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as number[] as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return false;
    const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
    return day <= (month === 2 && leap ? 29 : (DAYS[month - 1] as number));
  }
  function accepted(createdAt: string): boolean {
    try {
      parseEvent(JSON.stringify({ id: "evt_1", type: "flag.created", createdAt, environment: "p", data: {} }));
      return true;
    } catch {
      return false;
    }
  }
  const two = (max: number) => fc.integer({ min: 0, max }).map((n) => String(n).padStart(2, "0"));

  it("agrees with the capturing pattern on dates near every boundary", () => {
    const stamp = fc
      .tuple(
        fc.constantFrom("0000", "1900", "2000", "2023", "2024", "2100", "2400", "9999"),
        two(13),
        two(32),
        two(25),
        two(61),
        two(61),
        fc.constantFrom("", ".5", ".123456789", "."),
        fc.constantFrom("Z", "+00:00", "z", "+01:00", ""),
      )
      .map(([y, mo, d, h, mi, s, frac, zone]) => `${y}-${mo}-${d}T${h}:${mi}:${s}${frac}${zone}`);
    fc.assert(
      fc.property(stamp, (text) => accepted(text) === reference(text)),
      { numRuns: 2000 },
    );
    expect(accepted("2024-02-29T23:59:59.999Z")).toBe(true);
    expect(accepted("2023-02-29T00:00:00Z")).toBe(false);
    expect(accepted("2100-02-29T00:00:00Z")).toBe(false);
    expect(accepted("2000-02-29T00:00:00+00:00")).toBe(true);
  });

  it("agrees with it on arbitrary text over the pattern's alphabet and beyond", () => {
    const chars = fc.constantFrom(..."0123456789-:TZ+.", "٣", "\uff10", "\n", "é");
    fc.assert(
      fc.property(fc.array(chars, { minLength: 18, maxLength: 30 }), (parts) => {
        const text = parts.join("");
        return accepted(text) === reference(text);
      }),
      { numRuns: 2000 },
    );
  });
});

// DEFECTS found by this attack (issue 20 part 2). Each case fails today; the report names the fix.
describe("DEFECT: state shared between verifySignature calls", () => {
  const bytes = new TextEncoder().encode('{"id":"evt_outer"}');

  it("verifies a payload view whose getter runs another verification meanwhile (kept header buffer, src/crypto/node.ts)", async () => {
    // A DataView is a valid Payload; bytesOf() reads its byteOffset between the write of
    // the header into the kept buffer and the comparison, and any code there that verifies
    // another delivery overwrites that buffer. The old code (a local digest()) had no such state.
    function reentrant(inner: { payload: string | Uint8Array; signature: string }): DataView {
      const view = new DataView(bytes.buffer);
      Object.defineProperty(view, "byteOffset", {
        get() {
          void verifySignature({ secret: SECRET, ...inner });
          return 0;
        },
      });
      return view;
    }
    const right = mac(SECRET, bytes);
    const forged = "0".repeat(64);
    // The genuine signature must pass (today: false).
    const genuine = reentrant({ payload: "inner", signature: mac(SECRET, "inner") });
    expect(await verifySignature({ secret: SECRET, payload: genuine, signature: right })).toBe(true);
    // A forged one must not pass (today: true, because the inner call wrote the right MAC).
    const forgery = reentrant({ payload: bytes, signature: right });
    expect(await verifySignature({ secret: SECRET, payload: forgery, signature: forged })).toBe(false);
  });

  it("keeps one caller's tampering with its returned promise from changing another caller's answer (src/signature.ts VERIFIED/REFUSED)", async () => {
    const refused = verifySignature({ secret: SECRET, payload: "a", signature: "0".repeat(64) });
    // A caller (or an instrumentation library) decorating the promise it was given:
    // (On a frozen promise the assignment does nothing: that is one acceptable fix.)
    Reflect.set(refused, "then", (onFulfilled: (value: boolean) => unknown) => Promise.resolve(true).then(onFulfilled));
    const other = verifySignature({ secret: SECRET, payload: "b", signature: "1".repeat(64) });
    const answer = await new Promise<boolean>((done) => {
      other.then(done);
    });
    expect(answer).toBe(false);
  });
});

describe("DEFECT: the Express middleware's promise contract on the synchronous path", () => {
  it("rejects its returned Promise, never throws, when the next handler throws (src/adapters/express.ts passOn)", async () => {
    // A plain node:http (or Connect) user handles the route's failure on the promise the
    // middleware is typed to return. Before issue 20 the middleware was async, so a throwing
    // next() rejected it; now, with the raw bytes already there, next() runs synchronously and
    // its throw escapes the middleware, past the caller's .catch.
    const middleware = webhookMiddleware({ secret: SECRET });
    let threwSynchronously = false;
    const port = await serve((req, res) => {
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
    const { body } = signedDelivery(SECRET);
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      method: "POST",
      headers: { "service-signature": mac(SECRET, body), "x-raw-body": body },
    });
    expect(response.status).toBe(500);
    expect(threwSynchronously).toBe(false);
  });
});

describe("the Express middleware's promise contract, with onEvent", () => {
  it("rejects its returned Promise, never throws, when reading the request throws (a rawBody getter)", async () => {
    const middleware = webhookMiddleware({ secret: SECRET, onEvent: () => {} });
    let threwSynchronously = false;
    const port = await serve((req, res) => {
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
    const { body } = signedDelivery(SECRET);
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      method: "POST",
      headers: { "service-signature": mac(SECRET, body) },
      body,
    });
    expect(response.status).toBe(500);
    expect(threwSynchronously).toBe(false);
  });
});

describe("the Express middleware's promises", () => {
  it("gives each request a promise of its own on the synchronous path", async () => {
    const middleware = webhookMiddleware({ secret: SECRET });
    const returned: Promise<void>[] = [];
    const port = await serve((req, res) => {
      (req as IncomingMessage & { rawBody: string }).rawBody = String(req.headers["x-raw-body"]);
      returned.push(middleware(req, res, () => res.writeHead(204).end()));
    });
    for (let i = 0; i < 2; i++) {
      const { body } = signedDelivery(SECRET);
      const response = await fetch(`http://127.0.0.1:${port}/`, {
        method: "POST",
        headers: { "service-signature": mac(SECRET, body), "x-raw-body": body },
      });
      expect(response.status).toBe(204);
    }
    expect(returned).toHaveLength(2);
    expect(returned[0]).toBeInstanceOf(Promise);
    expect(returned[0]).not.toBe(returned[1]);
  });
});
