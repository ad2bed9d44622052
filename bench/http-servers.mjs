// One webhook receiver per process, for bench/http.mjs. Started with child_process.fork as
// `node http-servers.mjs <case>`: listens on 127.0.0.1 on a free port, reports the port over IPC,
// and exits when told to, when the parent goes away, or after a hard time limit.
//
// Every receiver checks the event it got (type "flag.updated") and answers 500 otherwise, so a
// run with zero non-2xx answers is a run in which every request was verified and parsed.
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { distUrl, limitVerify, SECRET } from "./lib.mjs";

const require = createRequire(import.meta.url);
const LIMIT = 1024 * 1024; // body limit for every receiver: 1 MiB
const SIGNATURE_HEADER = "service-signature";
// Every receiver gets the same request, to the path octokit wants by default.
const OCTOKIT_PATH = "/api/github/webhooks";

/** Reads a Node request body with a byte limit (the bare receivers' minimal reader). */
function readRaw(req, limit, callback) {
  const chunks = [];
  let size = 0;
  req.on("data", (chunk) => {
    size += chunk.length;
    if (size > limit) {
      req.removeAllListeners("data");
      req.pause();
      callback(new Error("too large"));
      return;
    }
    chunks.push(chunk);
  });
  req.on("end", () => {
    if (size <= limit) callback(null, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
  });
}

function answer(res, status) {
  res.statusCode = status;
  res.end();
}

/** The hand-written check: verify with node:crypto, JSON.parse, look at the type. Returns the status. */
function handWritten(body, signature) {
  if (!limitVerify(SECRET, body, signature)) return 401;
  let event;
  try {
    event = JSON.parse(body.toString("utf8"));
  } catch {
    return 400;
  }
  return event?.type === "flag.updated" ? 204 : 500;
}

const SERVERS = {
  /** Bare node:http: read the body, hand-written verify, JSON.parse, 204. */
  async "bare-node"() {
    return createServer((req, res) => {
      readRaw(req, LIMIT, (error, body) => {
        if (error) return answer(res, 413);
        answer(res, handWritten(body, req.headers[SIGNATURE_HEADER]));
      });
    });
  },

  /** Our Express middleware on a plain node:http server (no Express), 204 in next. */
  async "ours-node"() {
    const { webhookMiddleware } = await import(distUrl("express.js"));
    const middleware = webhookMiddleware({ secret: SECRET, limit: LIMIT });
    return createServer((req, res) => {
      middleware(req, res, (error) => {
        if (error) return answer(res, 500);
        answer(res, req.webhookEvent?.type === "flag.updated" ? 204 : 500);
      });
    });
  },

  /** Hand-written Express receiver: express.raw() + hand-written verify + JSON.parse, 204. */
  async "bare-express"() {
    const express = require("express");
    const app = express();
    app.post(OCTOKIT_PATH, express.raw({ type: "*/*", limit: LIMIT }), (req, res) => {
      res.status(handWritten(req.body, req.headers[SIGNATURE_HEADER])).end();
    });
    return createServer(app);
  },

  /** Our Express middleware inside Express, 204. */
  async "ours-express"() {
    const express = require("express");
    const { webhookMiddleware } = await import(distUrl("express.js"));
    const app = express();
    app.post(OCTOKIT_PATH, webhookMiddleware({ secret: SECRET, limit: LIMIT }), (req, res) => {
      res.status(req.webhookEvent?.type === "flag.updated" ? 204 : 500).end();
    });
    return createServer(app);
  },

  /** Our Koa middleware in Koa, 204. */
  async "ours-koa"() {
    const Koa = require("koa");
    const { webhookMiddleware } = await import(distUrl("koa.js"));
    const app = new Koa();
    app.use(webhookMiddleware({ secret: SECRET, limit: LIMIT }));
    app.use((ctx) => {
      ctx.status = ctx.state.webhookEvent?.type === "flag.updated" ? 204 : 500;
    });
    return createServer(app.callback());
  },

  /** Our fetch handler behind a small Node→fetch bridge. */
  async "ours-fetch"() {
    const { webhookHandler } = await import(distUrl("fetch.js"));
    const handler = webhookHandler({
      secret: SECRET,
      limit: LIMIT,
      onEvent(event) {
        if (event.type !== "flag.updated") throw new Error("unexpected event");
      },
    });
    return createServer((req, res) => {
      // The bridge: the whole body into a Request, the Response written back.
      readRaw(req, LIMIT, (error, body) => {
        if (error) return answer(res, 413);
        const headers = new Headers();
        for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
        const hasBody = req.method !== "GET" && req.method !== "HEAD";
        const request = new Request(`http://${req.headers.host ?? "127.0.0.1"}${req.url}`, {
          method: req.method,
          headers,
          body: hasBody ? body : undefined,
        });
        handler(request).then(
          async (response) => {
            res.statusCode = response.status;
            for (const [name, value] of response.headers) res.setHeader(name, value);
            res.end(response.body ? Buffer.from(await response.arrayBuffer()) : undefined);
          },
          () => answer(res, 500),
        );
      });
    });
  },

  /** @octokit/webhooks' Node middleware, fed the same bytes (it needs x-github-* headers). */
  async octokit() {
    const { Webhooks, createNodeMiddleware } = await import("@octokit/webhooks");
    const webhooks = new Webhooks({ secret: SECRET });
    webhooks.onAny(({ payload }) => {
      if (payload?.type !== "flag.updated") throw new Error("unexpected event");
    });
    const middleware = createNodeMiddleware(webhooks, { path: OCTOKIT_PATH });
    return createServer((req, res) => {
      middleware(req, res, () => answer(res, 404)); // next: only for another path
    });
  },
};

const name = process.argv[2];
if (!SERVERS[name]) {
  console.error(`usage: node http-servers.mjs <${Object.keys(SERVERS).join("|")}>`);
  process.exit(2);
}

const server = await SERVERS[name]();
server.keepAliveTimeout = 30_000;
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  if (process.send) process.send({ ready: true, port });
  else console.log(`${name} listening on http://127.0.0.1:${port}`);
});

// Exit by ourselves: on request, when the parent goes away, or after a hard limit.
const HARD_LIMIT_MS = Number(process.env.BENCH_SERVER_MAX_MS) || 10 * 60 * 1000;
setTimeout(() => process.exit(0), HARD_LIMIT_MS).unref();
process.on("message", (message) => {
  if (message === "stop") process.exit(0);
  // The parent reads this process's CPU time around a measured run: CPU per request is far
  // less sensitive to other load on the machine than requests per second.
  if (message === "cpu") process.send({ cpu: process.cpuUsage() });
});
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
