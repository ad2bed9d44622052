import { createServer, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import express from "express";
import Fastify from "fastify";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { describe, expect, it } from "vitest";
import { MAX_HELD_BYTES } from "../../src/node/held-writes.js";
import { delivery } from "../support/deliveries.js";
import { GatedStore } from "../support/gated-store.js";
import { attempt, exchange, post, rawDelivery, serverPerTest, urlOf } from "../support/http.js";
import { signal } from "../support/signal.js";

// The body of a held 2xx (node/held-writes.ts) waits in memory until the store has the event. A
// writer that streams into it gets back-pressure as from a socket (write() false past the
// response's high-water mark, then "drain"), so pipeline() pauses between chunks; and a body past
// MAX_HELD_BYTES is not held at all: the answer is cut, the delivery not handled, its claim
// released for the sender's retry.

const SECRET = "held-writes-secret";
const serve = serverPerTest();

/** `count` chunks of `size` bytes, as a stream. */
function source(count: number, size: number): Readable {
  return Readable.from(
    (function* () {
      for (let i = 0; i < count; i++) yield Buffer.alloc(size, 97 + (i % 26));
    })(),
  );
}

/** Counts the writes on `res` that return false (the writer must wait) and the drains after them. */
function backPressure(res: ServerResponse) {
  const seen = { refused: 0, drains: 0 };
  const write = res.write;
  res.write = function counted(this: ServerResponse, ...args: unknown[]) {
    const ok = (write as (...args: unknown[]) => boolean).apply(this, args);
    if (!ok) seen.refused++;
    return ok;
  } as ServerResponse["write"];
  res.on("drain", () => seen.drains++);
  return seen;
}

/** The two hosts: an Express app, and bare node:http calling the Express middleware. */
const hosts = {
  Express: (route: (res: ServerResponse) => Promise<void>) => {
    const app = express();
    const store = new MemoryDedupeStore();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } }), (_req, res) => {
      void route(res);
    });
    return createServer(app);
  },
  "node:http": (route: (res: ServerResponse) => Promise<void>) => {
    const middleware = webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } });
    return createServer((req, res) => void middleware(req, res, () => void route(res)));
  },
};

describe.each(Object.entries(hosts))("on %s, a held 2xx streamed with pipeline()", (_host, host) => {
  it("waits for drain past the high-water mark, then leaves whole once recorded; a copy is a duplicate", async () => {
    const size = 16 * 1024;
    const count = 40;
    const seen: { refused: number; drains: number }[] = [];
    const server = await serve(
      host(async (res) => {
        res.writeHead(200, { "content-type": "application/octet-stream" });
        const counts = backPressure(res);
        await pipeline(source(count, size), res);
        seen.push(counts);
      }),
    );
    const d = await delivery(SECRET);
    const first = await post(server, d);
    expect([first.status, first.text.length]).toEqual([200, count * size]);
    expect(seen).toHaveLength(1);
    // pipeline() paused at each refusal until its drain: never more chunks in memory than it allows.
    expect(seen[0]?.refused).toBeGreaterThan(0);
    expect(seen[0]?.drains).toBe(seen[0]?.refused);
    const copy = await post(server, d);
    expect([copy.status, copy.duplicate]).toEqual([204, "true"]);
  });

  it("takes a small write (true), reads writableNeedDrain true while a write waits for drain, and false once it came", async () => {
    const states: boolean[] = [];
    const server = await serve(
      host(async (res) => {
        res.writeHead(200);
        // A write below the high-water mark is taken as a socket takes it: true, nothing to wait for.
        states.push(res.write("a"), res.writableNeedDrain);
        const chunk = Buffer.alloc(res.writableHighWaterMark, 97);
        states.push(res.write(chunk), res.writableNeedDrain);
        await new Promise((resolve) => res.once("drain", resolve));
        states.push(res.writableNeedDrain);
        res.end();
      }),
    );
    const first = await post(server, await delivery(SECRET));
    expect(first.status).toBe(200);
    expect(states).toEqual([true, false, false, true, false]);
  });

  it("emits one drain for every write refused before it, as Node's response does", async () => {
    const seen: unknown[] = [];
    const server = await serve(
      host(async (res) => {
        res.writeHead(200);
        let drains = 0;
        res.on("drain", () => drains++);
        // The high-water mark is Node's default: 16 KiB on Node 20, 64 KiB since 22.
        const chunk = Buffer.alloc(res.writableHighWaterMark, 97);
        seen.push(chunk.length, res.write(chunk), res.write(chunk));
        await new Promise((resolve) => res.once("drain", resolve));
        // Two turns of the event loop more: a drain scheduled by the second write would have come.
        await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setImmediate(resolve));
        seen.push(drains);
        res.end();
      }),
    );
    const first = await post(server, await delivery(SECRET));
    expect([first.status, first.text.length]).toEqual([200, 2 * (seen[0] as number)]);
    expect(seen.slice(1)).toEqual([false, false, 1]);
  });

  it("gets no drain once cut while a write waits for one, and no longer reads writableNeedDrain, as Node's destroyed response", async () => {
    const seen: unknown[] = [];
    const { fired: done, fire } = signal();
    const server = await serve(
      host(async (res) => {
        res.writeHead(200);
        res.on("drain", () => seen.push("drain"));
        res.on("error", () => {});
        seen.push(res.write(Buffer.alloc(res.writableHighWaterMark, 97)));
        res.destroy();
        await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setImmediate(resolve));
        seen.push(res.writableNeedDrain);
        fire();
      }),
    );
    expect(await attempt(urlOf(server), await delivery(SECRET))).toBe(0);
    await done;
    expect(seen).toEqual([false, false]);
  });

  it("counts each held write as activity, as Node's own: an idle timeout shorter than the answer does not cut it", async () => {
    const server = await serve(
      host(async (res) => {
        res.setTimeout(500);
        res.writeHead(200);
        for (let i = 0; i < 8; i++) {
          res.write("x");
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        res.end("y");
      }),
    );
    const first = await post(server, await delivery(SECRET));
    expect([first.status, first.text]).toEqual([200, "xxxxxxxxy"]);
  });

  it(`cuts a body past ${MAX_HELD_BYTES} bytes: the writer gets an error, the sender no 2xx, and its retry runs the route again`, async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const server = await serve(
      host(async (res) => {
        runs++;
        // The first run streams 2 MiB; the retry answers a small body.
        res.writeHead(200);
        await pipeline(runs === 1 ? source(128, 16 * 1024) : source(1, 2), res).catch((error) => errors.push(error));
      }),
    );
    const d = await delivery(SECRET);
    expect(await attempt(urlOf(server), d)).toBe(0);
    expect(errors).toHaveLength(1);
    const retry = await post(server, d);
    expect([retry.status, retry.text.length, runs]).toEqual([200, 2, 2]);
  });
  it(`cuts an answer whose end() brings the held body past ${MAX_HELD_BYTES} bytes: the sender gets no 2xx, and its retry runs the route again`, async () => {
    let runs = 0;
    const server = await serve(
      host(async (res) => {
        runs++;
        res.writeHead(200);
        res.write("a");
        res.end(runs === 1 ? Buffer.alloc(MAX_HELD_BYTES, 98) : "b");
      }),
    );
    const d = await delivery(SECRET);
    expect(await attempt(urlOf(server), d)).toBe(0);
    const retry = await post(server, d);
    expect([retry.status, retry.text, runs]).toEqual([200, "ab", 2]);
  });

  it(`holds a body of exactly ${MAX_HELD_BYTES} bytes counted in its chunks' encoding, and refuses one byte more with ERR_HELD_ANSWER_TOO_LARGE`, async () => {
    const codes: unknown[] = [];
    let runs = 0;
    const server = await serve(
      host(async (res) => {
        runs++;
        res.writeHead(200);
        // Twice as many hex characters as bytes: the bound is on the bytes that leave, not the text.
        res.write("61".repeat(MAX_HELD_BYTES), "hex");
        if (runs === 1) res.end();
        // Refused as a socket refuses a write it will not take: false, and the error to its callback.
        else
          codes.push(
            res.write("b", (error) => void codes.push((error as { code?: unknown } | null)?.code, error?.message)),
          );
      }),
    );
    const reply = await post(server, await delivery(SECRET));
    expect([reply.status, reply.text.length]).toEqual([200, MAX_HELD_BYTES]);
    expect(await attempt(urlOf(server), await delivery(SECRET))).toBe(0);
    expect(codes).toEqual([
      false,
      "ERR_HELD_ANSWER_TOO_LARGE",
      "flag-webhooks: the body of a held 2xx passed 1 MiB, so the answer was cut: answer a webhook with a small body",
    ]);
  });
});

describe.each(Object.entries(hosts))(
  "on %s, a held 2xx whose writer waits for each write's callback",
  (_host, host) => {
    // The release waits for end(): a held write whose callback waited for the release too would
    // never let a writer that awaits each write's callback before the next (promisified res.write,
    // the callback form of a Writable) reach end(), and the answer would never leave. The callback
    // comes once the chunk is held, as Node's once the chunk is handed to the socket.
    it("answers 200 with the whole body", async () => {
      const server = await serve(
        host(async (res) => {
          res.writeHead(200, { "content-type": "text/plain" });
          for (const chunk of ["a", "b", "c"]) {
            await new Promise<void>((resolve, reject) => {
              res.write(chunk, (error) => (error ? reject(error) : resolve()));
            });
          }
          res.end("d");
        }),
      );
      // A liveness bound, not a speed claim: the route writes 4 bytes.
      const reply = await post(server, await delivery(SECRET), { signal: AbortSignal.timeout(5_000) });
      expect([reply.status, reply.text]).toEqual([200, "abcd"]);
    });

    it("calls each callback once, before the answer leaves, and keeps each chunk's encoding", async () => {
      const calls: string[] = [];
      let sent: Promise<void> | undefined;
      const server = await serve(
        host(async (res) => {
          sent = new Promise((resolve) => res.once("finish", resolve));
          res.writeHead(200);
          await new Promise<void>((resolve) => res.write("6869", "hex", () => resolve(void calls.push("hex"))));
          await new Promise<void>((resolve) => res.write("!", () => resolve(void calls.push("utf8"))));
          calls.push(`sent before end: ${res.socket?.bytesWritten ?? 0}`);
          res.end();
        }),
      );
      const reply = await post(server, await delivery(SECRET), { signal: AbortSignal.timeout(5_000) });
      await sent;
      expect([reply.status, reply.text]).toEqual([200, "hi!"]);
      // Not again when the held writes are handed to Node: each callback came once, while held.
      expect(calls).toEqual(["hex", "utf8", "sent before end: 0"]);
    });
  },
);

describe("held writes on a response with no socket of its own", () => {
  // Node gives a pipelined request's response the connection only once the answer before it is
  // sent: until then its socket is null, and a held write there has no connection to count as
  // activity on.
  it("the second of two pipelined deliveries, written while the first is held: both 200 with their bodies", async () => {
    const store = new GatedStore();
    const { fired: bothRan, fire: ran } = signal(2);
    const sockets: boolean[] = [];
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } }), (_req, res) => {
      sockets.push(res.socket !== null);
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("a");
      res.end("b");
      ran();
    });
    const server = await serve(createServer(app));
    void bothRan.then(() => store.open());
    const wire = await exchange(
      server,
      rawDelivery(await delivery(SECRET)) + rawDelivery(await delivery(SECRET), "connection: close\r\n"),
    );
    expect(sockets).toEqual([true, false]);
    // Each answer whole: its status, and its body in chunks ("a", "b", the last).
    const answers = wire
      .split(/(?=HTTP\/1\.1 )/)
      .map((answer) => [answer.slice(0, 12), answer.split("\r\n\r\n", 2)[1]]);
    const whole = ["HTTP/1.1 200", "1\r\na\r\n1\r\nb\r\n0"];
    expect(answers).toEqual([whole, whole]);
  });

  it("Fastify's inject() (a response whose socket is light-my-request's, with no idle timer): a 2xx written in parts leaves whole", async () => {
    const app = Fastify();
    await app.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
      onEvent: (_event, _request, reply) => {
        reply.hijack();
        reply.raw.writeHead(200, { "content-type": "text/plain" });
        reply.raw.write("a");
        reply.raw.end("b");
      },
    });
    try {
      const d = await delivery(SECRET);
      const reply = await app.inject({ method: "POST", url: "/webhooks", payload: d.body, headers: d.headers });
      expect([reply.statusCode, reply.body]).toEqual([200, "ab"]);
    } finally {
      await app.close();
    }
  });
});
