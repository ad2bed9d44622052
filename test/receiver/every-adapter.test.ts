import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect } from "node:net";
import express from "express";
import {
  type DedupeStore,
  type HandlerOptions,
  MemoryDedupeStore,
  WebhookError,
  type WebhookEvent,
} from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import Koa from "koa";
import { afterEach, describe, expect, it, vi } from "vitest";
import { signatureOf, signedHeaders } from "../support/deliveries.js";
import { close, listen } from "../support/http.js";

// The receiver's guarantees through every adapter over real HTTP (fetch with real Request
// objects): one handler option, the replay window, dedupe by event id, and the hooks. The same
// table runs against each; the receiver's own decisions in detail are in the other files here.

const SECRET = "delivery-secret";
const OLD_SECRET = "delivery-secret-old";
const NOW = Date.parse("2026-11-23T12:00:00Z");

interface Reply {
  status: number;
  headers: Headers;
  text: string;
}
type Options = Omit<HandlerOptions<never[]>, "onEvent" | "onError"> & {
  onEvent?: (event: WebhookEvent) => unknown;
  onError?: (error: unknown) => void;
};
interface Receiver {
  post(body: string, headers?: Record<string, string>): Promise<Reply>;
  close(): Promise<void>;
}
interface Target {
  name: string;
  start(options: Options): Promise<Receiver>;
}

function overHttp(server: Server): Receiver {
  const { port } = server.address() as { port: number };
  return {
    async post(body, headers = {}) {
      const response = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: "POST", body, headers });
      return { status: response.status, headers: response.headers, text: await response.text() };
    },
    close: () => close(server),
  };
}

const targets: Target[] = [
  {
    name: "Express with onEvent",
    async start(options) {
      const app = express();
      app.post("/webhooks", expressMiddleware({ onEvent: () => undefined, ...options }));
      return overHttp(await listen(createServer(app)));
    },
  },
  {
    name: "Express with next()",
    async start({ onEvent, ...options }) {
      const app = express();
      app.post("/webhooks", expressMiddleware(options), async (req, res) => {
        try {
          await onEvent?.(req.webhookEvent as WebhookEvent);
          res.sendStatus(204);
        } catch {
          res.sendStatus(500);
        }
      });
      return overHttp(await listen(createServer(app)));
    },
  },
  {
    name: "Koa with onEvent",
    async start(options) {
      const app = new Koa();
      app.use(koaMiddleware({ onEvent: () => undefined, ...options }));
      return overHttp(await listen(createServer(app.callback())));
    },
  },
  {
    name: "Koa with next()",
    async start({ onEvent, ...options }) {
      const app = new Koa<WebhookState>();
      app.silent = true;
      app.use(koaMiddleware(options));
      app.use(async (ctx) => {
        await onEvent?.(ctx.state.webhookEvent);
        ctx.status = 204;
      });
      return overHttp(await listen(createServer(app.callback())));
    },
  },
  {
    name: "fetch webhookHandler",
    async start(options) {
      const handler = webhookHandler({ onEvent: () => undefined, ...options });
      return {
        async post(body, headers = {}) {
          const response = await handler(new Request("http://localhost/webhooks", { method: "POST", body, headers }));
          return { status: response.status, headers: response.headers, text: await response.text() };
        },
        close: async () => {},
      };
    },
  },
];

let nextId = 0;
function event(overrides: Partial<Record<string, unknown>> = {}) {
  return {
    id: `evt_delivery_${++nextId}`,
    type: "flag.updated",
    createdAt: new Date(NOW).toISOString(),
    environment: "production",
    data: {
      flag: "new-checkout",
      changes: [{ path: "on", from: false, to: true }],
      actor: { type: "user", email: "dana@example.com" },
    },
    ...overrides,
  };
}
const signature = (body: string, secret = SECRET) => signatureOf(secret, body);
const signed = (body: string, secret = SECRET) => signedHeaders(secret, body);
const errorCode = (reply: Reply) => (reply.text ? JSON.parse(reply.text).error?.code : undefined);
const now = () => NOW;

let receiver: Receiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

describe.each(targets)("$name", (target) => {
  const start = async (options: Partial<Options>) => {
    receiver = await target.start({ secret: SECRET, now, ...options });
    return receiver;
  };

  describe("handler", () => {
    it("runs the handler with the typed event and answers 204", async () => {
      const seen: WebhookEvent[] = [];
      const { post } = await start({ onEvent: (e) => void seen.push(e) });
      const body = JSON.stringify(event());
      const reply = await post(body, await signed(body));
      expect([reply.status, reply.text]).toEqual([204, ""]);
      expect(seen.map((e) => e.type === "flag.updated" && e.data.actor.email)).toEqual(["dana@example.com"]);
    });

    it("answers a failing handler with 500, and never with the handler's own message", async () => {
      const onError = vi.fn();
      const { post } = await start({
        onEvent: () => {
          throw new Error("database password is hunter2");
        },
        onError,
      });
      const body = JSON.stringify(event());
      const reply = await post(body, await signed(body));
      expect(reply.status).toBe(500);
      expect(reply.text).not.toContain("hunter2");
    });
  });

  describe("replay window (maxAge)", () => {
    const cases = [
      { name: "accepts an event inside the window", createdAt: NOW - 4 * 60_000, status: 204 },
      { name: "accepts an event at exactly maxAge", createdAt: NOW - 5 * 60_000, status: 204 },
      {
        name: "refuses an event older than maxAge",
        createdAt: NOW - 5 * 60_000 - 1,
        status: 401,
        code: "event_expired",
      },
      { name: "accepts an event less than the skew ahead", createdAt: NOW + 59_000, status: 204 },
      {
        name: "refuses an event dated over a minute ahead",
        createdAt: NOW + 61_000,
        status: 401,
        code: "event_expired",
      },
      {
        name: "refuses an event from a year ahead",
        createdAt: NOW + 365 * 86_400_000,
        status: 401,
        code: "event_expired",
      },
    ];
    it.each(cases)("$name", async ({ createdAt, status, code }) => {
      const onEvent = vi.fn();
      const { post } = await start({ maxAge: "5m", onEvent });
      const body = JSON.stringify(event({ createdAt: new Date(createdAt).toISOString() }));
      const reply = await post(body, await signed(body));
      expect([reply.status, errorCode(reply)]).toEqual([status, code]);
      expect(onEvent).toHaveBeenCalledTimes(status === 204 ? 1 : 0);
    });

    it("refuses a createdAt that names no instant as invalid_payload", async () => {
      const { post } = await start({ maxAge: 300_000 });
      const body = JSON.stringify(event({ createdAt: "2026-13-01T00:00:00Z" }));
      const reply = await post(body, await signed(body));
      expect([reply.status, errorCode(reply)]).toEqual([400, "invalid_payload"]);
    });

    it("checks the signature first: a stale and forged delivery is invalid_signature", async () => {
      const { post } = await start({ maxAge: "5m" });
      const body = JSON.stringify(event({ createdAt: "2020-01-01T00:00:00Z" }));
      const reply = await post(body, await signed(body, "not-the-secret"));
      expect([reply.status, errorCode(reply)]).toEqual([401, "invalid_signature"]);
    });

    it("accepts any age without maxAge", async () => {
      const { post } = await start({});
      const body = JSON.stringify(event({ createdAt: "2020-01-01T00:00:00Z" }));
      expect((await post(body, await signed(body))).status).toBe(204);
    });
  });

  describe("dedupe by event id", () => {
    const dedupe = (store: DedupeStore = new MemoryDedupeStore()) => ({ store, ttl: "1h" });

    it("runs the handler once for a repeated delivery, and marks the repeat as a duplicate", async () => {
      const onEvent = vi.fn();
      const { post } = await start({ dedupe: dedupe(), onEvent });
      const body = JSON.stringify(event());
      const first = await post(body, await signed(body));
      const second = await post(body, await signed(body));
      expect([first.status, first.headers.get("webhook-duplicate")]).toEqual([204, null]);
      expect([second.status, second.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
      expect(onEvent).toHaveBeenCalledTimes(1);
    });

    it("dedupes by id, not bytes: the same event re-serialised and re-signed is a duplicate", async () => {
      const onEvent = vi.fn();
      const { post } = await start({ dedupe: dedupe(), onEvent });
      const original = event();
      const compact = JSON.stringify(original);
      const pretty = JSON.stringify(original, null, 2);
      await post(compact, await signed(compact));
      const again = await post(pretty, await signed(pretty));
      expect(again.headers.get("webhook-duplicate")).toBe("true");
      expect(onEvent).toHaveBeenCalledTimes(1);
    });

    it("never lets a forged delivery claim an id", async () => {
      const onEvent = vi.fn();
      const { post } = await start({ dedupe: dedupe(), onEvent });
      const body = JSON.stringify(event());
      expect((await post(body, await signed(body, "forger"))).status).toBe(401);
      expect((await post(body, await signed(body))).headers.get("webhook-duplicate")).toBeNull();
      expect(onEvent).toHaveBeenCalledTimes(1);
    });

    it("releases the claim when the handler fails, so the sender's retry runs it", async () => {
      let calls = 0;
      const { post } = await start({
        dedupe: dedupe(),
        onError: () => {},
        onEvent: () => {
          if (++calls === 1) throw new Error("first attempt fails");
        },
      });
      const body = JSON.stringify(event());
      expect((await post(body, await signed(body))).status).toBe(500);
      expect((await post(body, await signed(body))).status).toBe(204);
      expect((await post(body, await signed(body))).headers.get("webhook-duplicate")).toBe("true");
      expect(calls).toBe(2);
    });

    it("answers a copy that arrives while the first still runs with 409 and Retry-After, without running it", async () => {
      let finish = () => {};
      const running = new Promise<void>((resolve) => {
        finish = resolve;
      });
      const onEvent = vi.fn(() => running);
      const { post } = await start({ dedupe: dedupe(), onEvent });
      const body = JSON.stringify(event());
      const first = post(body, await signed(body));
      await vi.waitFor(() => expect(onEvent).toHaveBeenCalledTimes(1));
      const copy = await post(body, await signed(body));
      expect([copy.status, errorCode(copy), copy.headers.get("retry-after")]).toEqual([
        409,
        "delivery_in_progress",
        "5",
      ]);
      finish();
      expect((await first).status).toBe(204);
      expect(onEvent).toHaveBeenCalledTimes(1);
    });

    it("answers 503 store_unavailable with Retry-After when the store fails, and does not run the handler", async () => {
      const onEvent = vi.fn();
      const onError = vi.fn();
      const broken: DedupeStore = {
        claim: () => Promise.reject(new Error("ECONNREFUSED")),
        complete: () => {},
        release: () => {},
      };
      const { post } = await start({ dedupe: dedupe(broken), onEvent, onError });
      const body = JSON.stringify(event());
      const reply = await post(body, await signed(body));
      expect([reply.status, errorCode(reply), reply.headers.get("retry-after")]).toEqual([
        503,
        "store_unavailable",
        "10",
      ]);
      expect(onEvent).not.toHaveBeenCalled();
      // Signature first: a forged delivery is still 401, store or no store.
      expect((await post(body, await signed(body, "forger"))).status).toBe(401);
    });

    it("answers 503 when the store does not answer within dedupe.timeout", async () => {
      const hanging: DedupeStore = { claim: () => new Promise(() => {}), complete: () => {}, release: () => {} };
      const { post } = await start({ dedupe: { store: hanging, ttl: 60_000, timeout: 50 }, onError: () => {} });
      const body = JSON.stringify(event());
      expect(errorCode(await post(body, await signed(body)))).toBe("store_unavailable");
    });

    it("runs the handler without dedupe when the store fails and failOpen is set", async () => {
      const onEvent = vi.fn();
      const broken: DedupeStore = {
        claim: () => {
          throw new Error("down");
        },
        complete: () => {},
        release: () => {},
      };
      const { post } = await start({ dedupe: { ...dedupe(broken), failOpen: true }, onEvent, onError: () => {} });
      const body = JSON.stringify(event());
      expect((await post(body, await signed(body))).status).toBe(204);
      expect(onEvent).toHaveBeenCalledTimes(1);
    });
  });

  describe("hooks", () => {
    it("tells onVerified which secret of the list matched, and onRejected every refusal, never a secret", async () => {
      const verified: unknown[][] = [];
      const rejected: WebhookError[] = [];
      const { post } = await start({
        secret: [SECRET, OLD_SECRET],
        maxAge: "5m",
        onVerified: (...args) => void verified.push(args),
        onRejected: (error) => void rejected.push(error),
      });
      const newer = JSON.stringify(event());
      const older = JSON.stringify(event());
      const stale = JSON.stringify(event({ createdAt: "2020-01-01T00:00:00Z" }));
      await post(newer, await signed(newer, SECRET));
      await post(older, await signed(older, OLD_SECRET));
      await post(older, await signed(older, "forger"));
      await post(stale, await signed(stale));
      expect(verified.map(([e, info]) => [(e as WebhookEvent).id, info])).toEqual([
        [JSON.parse(newer).id, { secretIndex: 0 }],
        [JSON.parse(older).id, { secretIndex: 1 }],
        [JSON.parse(stale).id, { secretIndex: 0 }],
      ]);
      expect(rejected.map((e) => [e.code, e.status, e instanceof WebhookError])).toEqual([
        ["invalid_signature", 401, true],
        ["event_expired", 401, true],
      ]);
      const told = JSON.stringify([verified, rejected.map((e) => ({ ...e, message: e.message }))]);
      for (const secret of [SECRET, OLD_SECRET, await signature(older, OLD_SECRET)]) expect(told).not.toContain(secret);
    });

    it("keeps the answer and keeps serving when a hook throws", async () => {
      const onError = vi.fn();
      const { post } = await start({
        onVerified: () => {
          throw new Error("metrics backend down");
        },
        onRejected: () => {
          throw new Error("metrics backend down");
        },
        onError,
      });
      const body = JSON.stringify(event());
      expect((await post(body, await signed(body))).status).toBe(204);
      expect((await post(body, await signed(body, "forger"))).status).toBe(401);
      expect((await post(body, await signed(body))).status).toBe(204);
      expect(onError).toHaveBeenCalledTimes(3);
    });
  });
});

describe.each(targets.filter((t) => t.name !== "Express with next()" && t.name !== "Koa with next()"))(
  "$name: what onEvent returns or throws",
  (target) => {
    const start = async (options: Partial<Options>) => {
      receiver = await target.start({ secret: SECRET, now, ...options });
      return receiver;
    };

    it("answers with the { status, body } reply the handler returns", async () => {
      const { post } = await start({ onEvent: () => ({ status: 202, body: { queued: true } }) });
      const body = JSON.stringify(event());
      const reply = await post(body, await signed(body));
      expect([reply.status, reply.text, reply.headers.get("content-type")]).toEqual([
        202,
        '{"queued":true}',
        "application/json; charset=utf-8",
      ]);
    });

    it("keeps the status of a WebhookError the handler throws (a queue that is down answers 503)", async () => {
      const { post } = await start({
        onEvent: () => {
          throw new WebhookError("store_unavailable", "the queue is unavailable; retry later");
        },
      });
      const body = JSON.stringify(event());
      const reply = await post(body, await signed(body));
      expect([reply.status, errorCode(reply), reply.headers.get("retry-after")]).toEqual([
        503,
        "store_unavailable",
        "10",
      ]);
    });
  },
);

describe("Express and Koa without onEvent: the route is the handler", () => {
  it("releases the claim when the route answers 5xx", async () => {
    let calls = 0;
    const app = express();
    const store = new MemoryDedupeStore();
    app.post("/webhooks", expressMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } }), (_req, res) => {
      res.sendStatus(++calls === 1 ? 503 : 204);
    });
    receiver = overHttp(await listen(createServer(app)));
    const body = JSON.stringify(event());
    expect((await receiver.post(body, await signed(body))).status).toBe(503);
    expect((await receiver.post(body, await signed(body))).status).toBe(204);
    expect((await receiver.post(body, await signed(body))).headers.get("webhook-duplicate")).toBe("true");
    expect(calls).toBe(2);
  });

  it("releases the claim when the route never answers and the connection closes", async () => {
    const store = new MemoryDedupeStore();
    const middleware = expressMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } });
    let calls = 0;
    const server = await listen(
      createServer((req: IncomingMessage, res: ServerResponse) => {
        void middleware(req, res, () => {
          if (++calls === 1) res.destroy();
          else res.end();
        });
      }),
    );
    receiver = overHttp(server);
    const body = JSON.stringify(event());
    await expect(receiver.post(body, await signed(body))).rejects.toThrow();
    // The claim is released when the server sees the connection close, a moment after the client.
    await vi.waitFor(async () => expect((await receiver?.post(body, await signed(body)))?.status).toBe(200));
    expect(calls).toBe(2);
  });

  it("releases the claim when a Koa downstream throws", async () => {
    let calls = 0;
    const app = new Koa<WebhookState>();
    app.silent = true;
    app.use(koaMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }));
    app.use((ctx) => {
      if (++calls === 1) throw new Error("downstream failed");
      ctx.status = 204;
    });
    receiver = overHttp(await listen(createServer(app.callback())));
    const body = JSON.stringify(event());
    expect((await receiver.post(body, await signed(body))).status).toBe(500);
    expect((await receiver.post(body, await signed(body))).status).toBe(204);
    expect(calls).toBe(2);
  });
});

describe("a body that stops arriving", () => {
  const servers = [
    {
      name: "Express",
      make: () => {
        const app = express();
        app.post("/webhooks", expressMiddleware({ secret: SECRET, bodyTimeout: 300 }), (_req, res) =>
          res.sendStatus(204),
        );
        return createServer(app);
      },
    },
    {
      name: "Koa",
      make: () => {
        const app = new Koa();
        app.use(koaMiddleware({ secret: SECRET, bodyTimeout: 300 }));
        app.use((ctx) => {
          ctx.status = 204;
        });
        return createServer(app.callback());
      },
    },
  ];

  it.each(servers)("$name answers 408 body_timeout, frees the socket, and keeps serving", async ({ make }) => {
    const server = await listen(make());
    receiver = overHttp(server);
    const { port } = server.address() as { port: number };
    const body = JSON.stringify(event());
    const socket = connect(port, "127.0.0.1");
    // Content-Length promises 100 bytes more than are sent; then the client waits.
    socket.write(
      `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nService-Signature: ${await signature(body)}\r\n` +
        `Content-Length: ${Buffer.byteLength(body) + 100}\r\n\r\n${body}`,
    );
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk;
    });
    await new Promise((resolve) => socket.once("close", resolve));
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toMatch(/connection: close/i);
    expect(answer).toContain('"code":"body_timeout"');
    expect((await receiver.post(body, await signed(body))).status).toBe(204);
  });
});
