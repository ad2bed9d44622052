import { createServer, type Server } from "node:http";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import compression from "compression";
import express from "express";
import Fastify, { type FastifyReply } from "fastify";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookPlugin } from "flag-webhooks/fastify";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { attempt, exchange, post, rawDelivery, serverPerTest, urlOf } from "../support/http.js";
import { signal } from "../support/signal.js";

// The held answer (node/watch-answer.ts) behaves, on the wire and to the code that writes it, as
// the same answer would without holding: with dedupe on, a 2xx waits in memory until the store has
// the event, and then the bytes that leave are the bytes Node would have sent at once. Each route
// below runs twice, without and with dedupe, on one keep-alive connection carrying two pipelined
// deliveries, and the raw bytes of both answers (Date aside) and what the route saw must match.

const SECRET = "watch-answer-secret";
const serve = serverPerTest();

/**
 * Two signed deliveries written back to back on one connection (pipelined, keep-alive), the
 * second asking the server to close the connection after its answer: the end of what is read.
 */
async function twoPipelined(extraHeaders: string): Promise<string> {
  return (
    rawDelivery(await delivery(SECRET), extraHeaders) +
    rawDelivery(await delivery(SECRET), `${extraHeaders}connection: close\r\n`)
  );
}

/** The raw bytes the server answers on one connection, read to its close, Date headers left out. */
async function wireOf(server: Server, bytes: string): Promise<string> {
  return (await exchange(server, bytes)).replace(/^date: .*\r\n/gim, "");
}

interface Writer {
  name: string;
  route: (seen: string[]) => express.RequestHandler;
  /** Compression before the middleware ("before") or between it and the route ("after"). */
  compress?: "before" | "after";
  headers?: string;
}

const long = "x".repeat(4000);

const writers: Writer[] = [
  {
    name: "res.send() twice: the second throws, and the first answer's Content-Length is its own",
    route: (seen) => (_req, res) => {
      res.send("hello");
      try {
        res.send("a much longer body than the first");
      } catch (error) {
        seen.push((error as { code?: string }).code ?? "?");
      }
    },
  },
  {
    name: "res.end() again after res.send(): nothing more, no error",
    route: (seen) => (_req, res) => {
      res.status(200).send("ok");
      res.end();
      seen.push(`ended ${res.writableEnded}`);
    },
  },
  {
    name: "res.write() after res.end(): refused (false, ERR_STREAM_WRITE_AFTER_END), never part of the body",
    route: (seen) => (_req, res) => {
      res.on("error", (error: NodeJS.ErrnoException) => seen.push(`error ${error.code}`));
      res.end("ok");
      seen.push(
        `write ${res.write("extra", (error) => seen.push(`callback ${(error as NodeJS.ErrnoException)?.code}`))}`,
      );
    },
  },
  {
    name: "res.setHeader() after the answer: refused with ERR_HTTP_HEADERS_SENT, never sent",
    route: (seen) => (_req, res) => {
      res.status(200).send("ok");
      try {
        res.setHeader("x-late", "1");
      } catch (error) {
        seen.push((error as { code?: string }).code ?? "?");
      }
      try {
        res.removeHeader("content-type");
      } catch (error) {
        seen.push((error as { code?: string }).code ?? "?");
      }
    },
  },
  {
    name: "res.writeHead(201, headers), then writes: the status reads back as written",
    route: (seen) => (_req, res) => {
      res.writeHead(201, { "x-a": "1", "content-type": "text/plain" });
      seen.push(`status ${res.statusCode}`);
      res.write("a");
      res.write("b");
      res.end("c");
    },
  },
  {
    name: "res.writeHead(200, headers) with a value or a name Node refuses: each throws at once, as Node's does, and a good head after them leaves",
    route: (seen) => (_req, res) => {
      for (const headers of [{ "x-bad": "a\nb" }, { "x bad": "1" }, { "x-none": undefined }]) {
        try {
          res.writeHead(200, headers as unknown as Record<string, string>);
        } catch (error) {
          seen.push((error as { code?: string }).code ?? "?");
        }
      }
      res.writeHead(200, { "x-good": "1" });
      res.end("ok");
    },
  },
  {
    name: "res.writeHead() twice: the second throws Node's refusal, and the first head stands",
    route: (seen) => (_req, res) => {
      res.writeHead(201, { "x-a": "1" });
      try {
        res.writeHead(202, { "x-b": "1" });
      } catch (error) {
        seen.push(`${(error as { code?: string }).code}: ${(error as Error).message}`);
      }
      res.end("ok");
    },
  },
  {
    name: "res.writeHead(200, headers) with the headers as an array of names and values: they leave with the head",
    route: (seen) => (_req, res) => {
      res.writeHead(200, ["x-a", "1", "content-type", "text/plain"]);
      seen.push(`status ${res.statusCode}`);
      res.end("ok");
    },
  },
  {
    name: "res.statusCode changed after a write began the answer: the status that began it leaves",
    route: (seen) => (_req, res) => {
      res.statusCode = 200;
      res.write("a");
      res.statusCode = 500;
      res.end("b");
      seen.push(`status ${res.statusCode}`);
    },
  },
  {
    name: "res.writeHead(200, reason, headers): the reason and the headers leave with the head",
    route: (seen) => (_req, res) => {
      res.writeHead(200, "Fine", { "x-a": "1", "content-type": "text/plain" });
      seen.push(`status ${res.statusCode} ${res.getHeader("x-a")}`);
      res.end("ok");
    },
  },
  {
    name: "a statusMessage Node refuses, then res.end(): it throws at once, as Node's does",
    route: (seen) => (_req, res) => {
      res.statusMessage = "OK\r\nx-injected: 1";
      try {
        res.end("ok");
      } catch (error) {
        seen.push((error as { code?: string }).code ?? "?");
        res.statusMessage = "Fine";
        res.end("ok");
      }
    },
  },
  {
    name: "a stream piped into res",
    route: () => (_req, res) => {
      res.setHeader("content-type", "text/plain");
      Readable.from(["a", "b", "c"]).pipe(res);
    },
  },
  {
    name: "trailers",
    route: () => (_req, res) => {
      res.writeHead(200, { trailer: "x-t", "content-type": "text/plain" });
      res.write("a");
      res.addTrailers({ "x-t": "v" });
      res.end();
    },
  },
  {
    name: "res.writeContinue() for Expect: 100-continue",
    headers: "expect: 100-continue\r\n",
    route: () => (_req, res) => {
      res.writeContinue();
      res.status(200).send("ok");
    },
  },
  {
    name: "res.writeEarlyHints()",
    route: () => (_req, res) => {
      res.writeEarlyHints({ link: "</a.css>; rel=preload" });
      res.status(200).send("ok");
    },
  },
  {
    name: "res.flushHeaders(), then the body: the head reads as sent once flushed",
    route: (seen) => (_req, res) => {
      res.status(200);
      res.flushHeaders();
      seen.push(`sent ${res.headersSent}`);
      res.end("ok");
    },
  },
  {
    name: "res.writeHead(200), then res.flushHeaders(), then the body",
    route: (seen) => (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.flushHeaders();
      seen.push(`sent ${res.headersSent}`);
      res.write("a");
      res.end("b");
    },
  },
  {
    name: "res.flushHeaders() twice, around a write",
    route: () => (_req, res) => {
      res.status(200);
      res.flushHeaders();
      res.write("a");
      res.flushHeaders();
      res.end("b");
    },
  },
  {
    name: "res.writeHeader(), Node's old name for writeHead",
    route: (seen) => (_req, res) => {
      (res as unknown as { writeHeader: express.Response["writeHead"] }).writeHeader(202, { "x-a": "1" });
      seen.push(`status ${res.statusCode} sent ${res.headersSent}`);
      res.end("ok");
    },
  },
  {
    name: "res.setHeaders() after a written head, with headers and with none: refused",
    route: (seen) => (_req, res) => {
      res.writeHead(200);
      for (const headers of [new Map([["x-late", "1"]]), new Map(), undefined]) {
        try {
          res.setHeaders(headers as Map<string, string>);
          seen.push("set");
        } catch (error) {
          seen.push((error as { code?: string }).code ?? "?");
        }
      }
      res.end("ok");
    },
  },
  {
    name: "res.getHeaderNames(), getHeader(), hasHeader() and getHeaders() after a written head",
    route: (seen) => (_req, res) => {
      res.setHeader("x-before", "1");
      res.writeHead(200, { "x-a": "1" });
      seen.push(JSON.stringify([res.getHeaderNames(), res.getHeader("x-a"), res.hasHeader("x-a"), res.getHeaders()]));
      res.end("ok");
    },
  },
  {
    name: "res.writeProcessing() and res.writeEarlyHints() after a written head: each goes out before it",
    route: () => (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.writeProcessing();
      res.writeEarlyHints({ link: "</a.css>; rel=preload" });
      res.end("ok");
    },
  },
  {
    name: "res.writeHead(200), res.addTrailers(), res.end()",
    route: () => (_req, res) => {
      res.writeHead(200, { trailer: "x-t", "transfer-encoding": "chunked" });
      res.addTrailers({ "x-t": "v" });
      res.end("ok");
    },
  },
  {
    name: "res.cork() and res.uncork()",
    route: () => (_req, res) => {
      res.cork();
      res.write("a");
      res.write("b");
      process.nextTick(() => {
        res.uncork();
        res.end();
      });
    },
  },
  {
    name: "res.sendFile() (the send package: a file streamed, its headers set as it opens)",
    route: (seen) => (_req, res) => {
      // dotfiles: this file may sit below a dot folder (Stryker's sandbox), which send refuses by default.
      const options = { headers: { "content-type": "text/plain" }, dotfiles: "allow" as const };
      res.sendFile(fileURLToPath(import.meta.url), options, (error) =>
        seen.push(`sent ${error === undefined ? "ok" : String(error)}`),
      );
    },
  },
  {
    name: "the compression package before the middleware",
    compress: "before",
    headers: "accept-encoding: gzip\r\n",
    route: () => (_req, res) => {
      res.type("text").send(long);
    },
  },
  {
    name: "the compression package between the middleware and the route, streaming writes",
    compress: "after",
    headers: "accept-encoding: gzip\r\n",
    route: () => (_req, res) => {
      res.type("text");
      res.write(long);
      res.write(long);
      res.end();
    },
  },
];

/** The app for `writer`, with or without dedupe (the claim that makes a 2xx wait). */
async function appFor(writer: Writer, dedupe: boolean, seen: string[], errors: unknown[]): Promise<Server> {
  const app = express();
  const middleware = webhookMiddleware({
    secret: SECRET,
    onError: (error) => errors.push(error),
    ...(dedupe ? { dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } } : {}),
  });
  const route = writer.route(seen);
  const squeeze = compression({ threshold: 0 });
  if (writer.compress === "before") app.post("/webhooks", squeeze, middleware, route);
  else if (writer.compress === "after") app.post("/webhooks", middleware, squeeze, route);
  else app.post("/webhooks", middleware, route);
  app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    errors.push(error);
    if (!res.headersSent) res.status(500).end();
  });
  return serve(createServer(app));
}

describe("a held 2xx leaves as Node would have sent it at once", () => {
  for (const writer of writers) {
    it(writer.name, async () => {
      const runs = [];
      for (const dedupe of [false, true]) {
        const seen: string[] = [];
        const errors: unknown[] = [];
        const server = await appFor(writer, dedupe, seen, errors);
        const wire = await wireOf(server, await twoPipelined(writer.headers ?? ""));
        runs.push({ wire, seen, errors: errors.map(String) });
      }
      const [plain, held] = runs;
      expect(plain?.wire).toMatch(/^HTTP\/1\.1 (100|102|103|20\d) [\s\S]*HTTP\/1\.1 20\d /);
      expect(held).toEqual(plain);
    });
  }
});

const fastifies: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const app of fastifies.splice(0)) await app.close();
});
const dedupeIf = (on: boolean) => (on ? { dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } } : {});

/** A Fastify app with the plugin, whose onEvent answers with `answer(reply)`, and hooks in its context. */
async function fastifyWith(dedupe: boolean, seen: string[], answer: (reply: FastifyReply) => unknown) {
  const app = Fastify();
  fastifies.push(app);
  await app.register(async (scope) => {
    scope.addHook("onSend", async (_request, reply, payload) => {
      reply.header("x-on-send", "1");
      return typeof payload === "string" ? `[${payload}]` : payload;
    });
    scope.addHook("onResponse", async (_request, reply) => void seen.push(`onResponse ${reply.statusCode}`));
    await scope.register(webhookPlugin, {
      path: "/webhooks",
      secret: SECRET,
      ...dedupeIf(dedupe),
      onEvent: (_event, _request, reply) => answer(reply),
    });
  });
  await app.ready();
  return serve(app.server);
}

const frameworks: { name: string; make(dedupe: boolean, seen: string[]): Promise<Server> }[] = [
  {
    name: "Fastify, return reply.send(stream), as Fastify asks of a handler that sends",
    make: (dedupe, seen) =>
      fastifyWith(dedupe, seen, (reply) => reply.type("text/plain").send(Readable.from(["a", "b"]))),
  },
  {
    name: "Fastify, an async handler that sends a stream and returns the reply",
    make: (dedupe, seen) =>
      fastifyWith(dedupe, seen, async (reply) => {
        reply.type("text/plain").send(Readable.from(["a", "b"]));
        return reply;
      }),
  },
  {
    name: "Fastify, reply.send() through an onSend hook that rewrites the payload, and onResponse",
    make: (dedupe, seen) => fastifyWith(dedupe, seen, (reply) => reply.code(200).type("text/plain").send("ok")),
  },
  {
    name: "Fastify, reply.hijack() and a head with headers written on reply.raw",
    make: (dedupe, seen) =>
      fastifyWith(dedupe, seen, (reply) => {
        reply.hijack();
        reply.raw.writeHead(202, { "x-raw": "1" });
        reply.raw.end("raw");
      }),
  },
  {
    name: "Koa, a stream as ctx.body from the middleware after",
    async make(dedupe) {
      const app = new Koa();
      app.use(koaMiddleware({ secret: SECRET, ...dedupeIf(dedupe) }));
      app.use((ctx) => {
        ctx.type = "text";
        ctx.body = Readable.from(["a", "b"]);
      });
      return serve(createServer(app.callback()));
    },
  },
  {
    name: "Koa, a stream as ctx.body from onEvent",
    async make(dedupe) {
      const app = new Koa();
      app.use(
        koaMiddleware({
          secret: SECRET,
          ...dedupeIf(dedupe),
          onEvent: (_event, ctx: Koa.Context) => {
            ctx.type = "text";
            ctx.body = Readable.from(["a", "b"]);
          },
        }),
      );
      return serve(createServer(app.callback()));
    },
  },
];

describe("a held 2xx written through Fastify and Koa leaves as it would at once", () => {
  for (const framework of frameworks) {
    it(framework.name, async () => {
      const runs = [];
      for (const dedupe of [false, true]) {
        const seen: string[] = [];
        const server = await framework.make(dedupe, seen);
        const wire = await wireOf(server, await twoPipelined(""));
        runs.push({ wire, seen });
      }
      const [plain, held] = runs;
      expect(plain?.wire).toMatch(/^HTTP\/1\.1 20\d [\s\S]*HTTP\/1\.1 20\d /);
      expect(held).toEqual(plain);
    });
  }
});

describe("onEvent that answers on res and then touches it again", () => {
  it("res.send() then res.end(): the 2xx stands, the event is handled once and the copy is a duplicate", async () => {
    let runs = 0;
    const errors: unknown[] = [];
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware<express.Request, express.Response>({
        secret: SECRET,
        onError: (error) => errors.push(error),
        dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
        onEvent: (_event, _req, res) => {
          runs++;
          res.status(200).send("ok");
          res.end();
        },
      }),
    );
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    const first = await post(server, d);
    const copy = await post(server, d);
    expect([first.status, first.text, copy.status, copy.duplicate, runs, errors]).toEqual([
      200,
      "ok",
      204,
      "true",
      1,
      [],
    ]);
  });
});

/** A store that tells when it has refused `copies` claims as in flight: the copies were answered 409. */
function refusing(copies: number): { store: MemoryDedupeStore; refused: Promise<void> } {
  const store = new MemoryDedupeStore();
  const claim = store.claim.bind(store);
  const { fired: refused, fire } = signal(copies);
  store.claim = (id, lease) => {
    const result = claim(id, lease);
    if (result === "in_flight") fire();
    return result;
  };
  return { store, refused };
}

describe("copies of one event pipelined on one keep-alive connection", () => {
  it("the first's held 2xx, then each copy's 409, in order, on that connection; the handler runs once", async () => {
    let runs = 0;
    const { store, refused } = refusing(2);
    const { fired: ranAgain, fire: another } = signal();
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } }), async (_req, res) => {
      if (++runs > 1) another();
      // The first answers once both copies were refused while it ran (or once a copy ran too:
      // then the count below fails rather than the test waiting for ever).
      await Promise.race([refused, ranAgain]);
      res.status(200).send("handled");
    });
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    const one = rawDelivery(d);
    const wire = await exchange(server, one + one + rawDelivery(d, "connection: close\r\n"));
    const answers = wire.split(/(?=HTTP\/1\.1 )/).map((answer) => [answer.slice(9, 12), answer.split("\r\n\r\n")[1]]);
    expect(answers.map(([status]) => status)).toEqual(["200", "409", "409"]);
    expect(answers[0]?.[1]).toBe("handled");
    expect(JSON.parse(answers[1]?.[1] ?? "").error.code).toBe("delivery_in_progress");
    expect(runs).toBe(1);
  });
});

describe("a route without onEvent that begins a 2xx and keeps working when its client hangs up", () => {
  it("holds the claim until the route ends its answer: the sender's retry meanwhile is 409, never a second run at once", async () => {
    let runs = 0;
    let running = 0;
    let most = 0;
    const { fired: started, fire: start } = signal();
    const { fired: gone, fire: leave } = signal();
    const { fired: finish, fire: release } = signal();
    const { fired: ended, fire: end } = signal();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      async (_req, res) => {
        runs++;
        running++;
        most = Math.max(most, running);
        res.once("close", leave);
        res.status(200).write("working");
        start();
        // The first run works until the test lets it end; a second run (the fault) ends it at once.
        if (runs > 1) release();
        await finish;
        running--;
        res.end();
        end();
      },
    );
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    const client = new AbortController();
    const first = post(server, d, { signal: client.signal }).catch(() => undefined);
    await started;
    client.abort();
    await first;
    // The server saw the client leave (the watch's own "close" listener ran before the route's).
    await gone;
    const retry = await post(server, d);
    release();
    await ended;
    expect([retry.status, runs, most]).toEqual([409, 1, 1]);
  });
});

/**
 * An Express route that begins an answer of `status` (a 2xx held, a non-2xx sent at once) and then
 * fails while its client listens: Express's final handler cuts the connection. What the client
 * saw first and on its retry, and how many times the route ran.
 */
async function beginsThenFails(status: number): Promise<[number, number, number]> {
  let runs = 0;
  const app = express();
  app.post(
    "/webhooks",
    webhookMiddleware({ secret: SECRET, onError: () => {}, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
    (_req, res, next) => {
      runs++;
      if (runs > 1) {
        res.sendStatus(204);
        return;
      }
      res.status(status).write("partial");
      next(new Error("failed mid-answer"));
    },
  );
  const server = await serve(createServer(app));
  const d = await delivery(SECRET);
  const first = await attempt(urlOf(server), d);
  const retry = await attempt(urlOf(server), d);
  return [first, retry, runs];
}

describe("a held 2xx the receiver does not stand behind", () => {
  it("onEvent that answers 200 and then throws: its error's 500 leaves in place of the 2xx, with none of the handler's headers, and the retry runs it again", async () => {
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware<express.Request, express.Response>({
        secret: SECRET,
        onError: () => {},
        dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
        onEvent: (_event, _req, res) => {
          runs++;
          res.setHeader("x-handler", "1");
          res.status(200).type("text").send("handled");
          if (runs === 1) throw new Error("failed after answering");
        },
      }),
    );
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    const first = await post(server, d);
    expect([first.status, first.code, first.headers.get("x-handler"), first.headers.get("connection")]).toEqual([
      500,
      "handler_error",
      null,
      "keep-alive",
    ]);
    const retry = await post(server, d);
    expect([retry.status, retry.text, retry.headers.get("x-handler"), runs]).toEqual([200, "handled", "1", 2]);
  });

  it("a route that begins a 2xx and then fails while its client listens: the answer is cut, no 2xx arrives, and the retry runs the route again", async () => {
    expect(await beginsThenFails(200)).toEqual([0, 204, 2]);
  });
});

describe("a connection cut by the server's own code while the route works", () => {
  it("a route that begins a non-2xx (never held) and then fails while its client listens: cut, and the retry runs the route again", async () => {
    expect(await beginsThenFails(500)).toEqual([0, 204, 2]);
  });

  it("a route that cuts its connection before writing anything, and works on: its claim stands until it ends, a retry meanwhile is 409", async () => {
    let runs = 0;
    const { fired: cut, fire: cutIt } = signal();
    const { fired: finish, fire: release } = signal();
    const { fired: ended, fire: end } = signal();
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      async (req, res) => {
        runs++;
        res.once("close", cutIt);
        // A second run (the fault) ends the first at once, so the count below fails rather than the test hanging.
        if (runs > 1) release();
        else req.socket.destroy();
        await finish;
        res.sendStatus(204);
        end();
      },
    );
    const server = await serve(createServer(app));
    const d = await delivery(SECRET);
    expect(await attempt(urlOf(server), d)).toBe(0);
    await cut;
    const retry = await attempt(urlOf(server), d);
    release();
    await ended;
    expect([retry, runs]).toEqual([409, 1]);
  });
});

describe("the status the decision reads is the one that left", () => {
  /** An Express app whose route is `route`, with dedupe; the route's runs are counted. */
  async function counted(route: (res: express.Response) => void) {
    const app = express();
    let runs = 0;
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (_req, res) => {
        runs++;
        route(res);
      },
    );
    const server = await serve(createServer(app));
    return { server, runs: () => runs };
  }

  it("a held 201 whose statusCode is set to 500 before a write: 201 leaves and the event is handled (a copy is a duplicate)", async () => {
    const { server, runs } = await counted((res) => {
      res.writeHead(201);
      res.statusCode = 500;
      res.write("a");
      res.end("b");
    });
    const d = await delivery(SECRET);
    const first = await post(server, d);
    const copy = await post(server, d);
    expect([first.status, first.text, copy.status, copy.duplicate, runs()]).toEqual([201, "ab", 204, "true", 1]);
  });

  it("a 404 begun with a write, then statusCode 200 and more writes: the 404 stands and the event is not handled (a copy runs again)", async () => {
    const { server, runs } = await counted((res) => {
      res.statusCode = 404;
      res.write("a");
      res.statusCode = 200;
      res.write("b");
      res.end();
    });
    const d = await delivery(SECRET);
    const first = await post(server, d);
    const copy = await post(server, d);
    expect([first.status, first.text, copy.status, copy.duplicate, runs()]).toEqual([404, "ab", 404, null, 2]);
  });
});
