import type { Server } from "node:http";
import type express from "express";
import { MemoryDedupeStore, SIGNATURE_HEADER, WebhookError } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import { afterEach, describe, expect, it, vi } from "vitest";
import { delivery } from "../support/deliveries.js";
import { expressServer } from "../support/express.js";
import { close, listen, post } from "../support/http.js";
import {
  body,
  error,
  handler,
  JSON_TYPE,
  type Options,
  recordingStore,
  refusal,
  request,
  SECRET,
  seen,
} from "../support/receiver.js";

// What the receiver answers, as a fetch user sees it: each refusal's status, error body and
// headers, and what onEvent's return value or throw becomes. An answer that is not 2xx never
// marks the event handled: a value onEvent returns that the receiver does not recognise, or
// cannot write, is a handler failure (500), and the claim is released for the sender's retry.
// The same answers through every adapter: test/receiver/every-adapter.test.ts.

const dedupe = () => ({ store: new MemoryDedupeStore(), ttl: 60_000 });
const quiet = () => undefined;

describe("refusals: status, error body and headers", () => {
  it("405 to another method, with Allow: POST, closing the connection", async () => {
    const answer = await seen(await handler({})(await request(body(), { method: "PUT" })));
    expect(answer).toEqual({
      ...refusal,
      status: 405,
      allow: "POST",
      close: "close",
      body: error("method_not_allowed", "method PUT not allowed: deliveries are POST"),
    });
  });

  it("401 missing_signature closes the connection, unread; a wrong one does not", async () => {
    const missing = await seen(await handler({})(await request(body(), { headers: {} })));
    expect(missing).toEqual({
      ...refusal,
      status: 401,
      close: "close",
      body: error("missing_signature", `missing ${SIGNATURE_HEADER} header`),
    });
    const wrong = await seen(
      await handler({})(await request(body(), { headers: { [SIGNATURE_HEADER]: "0".repeat(64) } })),
    );
    expect(wrong).toEqual({
      ...refusal,
      status: 401,
      body: error("invalid_signature", `${SIGNATURE_HEADER} header is not the HMAC-SHA256 of the body`),
    });
  });

  it("413 past the limit, closing the connection", async () => {
    const answer = await seen(await handler({ limit: 10 })(await request()));
    expect(answer).toEqual({
      ...refusal,
      status: 413,
      close: "close",
      body: error("payload_too_large", "body is larger than the limit of 10 bytes"),
    });
  });

  it("refuses a missing signature before reading the body: no 413 for an unsigned oversized body", async () => {
    const answer = await seen(await handler({ limit: 10 })(await request(body(), { headers: {} })));
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(error("missing_signature", `missing ${SIGNATURE_HEADER} header`));
  });

  it("500 handler_error without the thrown message, which goes to onError", async () => {
    const errors: unknown[] = [];
    const thrown = new Error("database password is hunter2");
    const answer = await seen(
      await handler({ onEvent: () => Promise.reject(thrown), onError: (e) => void errors.push(e) })(await request()),
    );
    expect(answer).toEqual({ ...refusal, status: 500, body: error("handler_error", "the webhook handler failed") });
    expect(errors).toEqual([thrown]);
  });

  it("a WebhookError the handler throws keeps its status and message, with Retry-After, and goes to onRejected", async () => {
    const rejected: WebhookError[] = [];
    const errors: unknown[] = [];
    const thrown = new WebhookError("store_unavailable", "the queue is full");
    const answer = await seen(
      await handler({
        onEvent: () => {
          throw thrown;
        },
        onRejected: (e) => void rejected.push(e),
        onError: (e) => void errors.push(e),
      })(await request()),
    );
    expect(answer).toEqual({
      ...refusal,
      status: 503,
      retryAfter: "10",
      body: error("store_unavailable", "the queue is full"),
    });
    expect(rejected).toEqual([thrown]);
    expect(errors).toEqual([]);
  });

  it("409 to a copy while the first is handled, with Retry-After: 5; 204 webhook-duplicate after", async () => {
    const text = body("evt_busy");
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const store = new MemoryDedupeStore();
    const receive = handler({ dedupe: { store, ttl: "1h" }, onEvent: () => gate });
    const first = receive(await request(text));
    await vi.waitFor(() => expect(store.size).toBe(1));
    const busy = await seen(await receive(await request(text)));
    expect(busy).toEqual({
      ...refusal,
      status: 409,
      retryAfter: "5",
      body: error("delivery_in_progress", "event evt_busy is being handled by another delivery; retry later"),
    });
    release();
    expect((await first).status).toBe(204);
    const copy = await seen(await receive(await request(text)));
    expect(copy).toEqual({ ...refusal, type: null, status: 204, duplicate: "true", body: null });
  });

  it("503 store_unavailable when the store throws, with Retry-After: 10 and the cause reported", async () => {
    const errors: unknown[] = [];
    const broken = new Error("ECONNREFUSED");
    const store = { ...recordingStore(), claim: () => Promise.reject(broken) };
    const answer = await seen(
      await handler({ dedupe: { store, ttl: "1h" }, onError: (e) => void errors.push(e) })(await request()),
    );
    expect(answer).toEqual({
      ...refusal,
      status: 503,
      retryAfter: "10",
      body: error("store_unavailable", "the dedupe store is unavailable; retry later"),
    });
    expect(errors).toEqual([broken]);
  });
});

describe("what onEvent returns", () => {
  const answerTo = async (value: unknown, options: Options = {}) =>
    seen(await handler({ onEvent: () => value, ...options })(await request()));

  it("a reply with a JSON body gets a JSON content type, unless it names its own in any case", async () => {
    expect(await answerTo({ status: 202, body: { queued: true } })).toMatchObject({
      status: 202,
      type: JSON_TYPE,
      body: { queued: true },
    });
    expect(
      await answerTo({ status: 200, headers: { "Content-Type": "application/vnd.x+json" }, body: [1] }),
    ).toMatchObject({ status: 200, type: "application/vnd.x+json", body: "[1]" });
  });

  it("a string body is sent as it is, with no JSON content type; a null body is no body", async () => {
    const text = await handler({ onEvent: () => ({ status: 200, body: "ok" }) })(await request());
    expect([text.status, text.headers.get("content-type"), await text.text()]).toEqual([
      200,
      "text/plain;charset=UTF-8",
      "ok",
    ]);
    expect(await answerTo({ status: 202, body: null })).toMatchObject({ status: 202, type: null, body: null });
    expect(await answerTo({ status: 299, headers: { "x-run": "1" } })).toMatchObject({ status: 299, body: null });
  });

  it("takes reply statuses from 200 to 599, bounds included", async () => {
    expect(await answerTo({ status: 200 })).toMatchObject({ status: 200, body: null, close: null });
    expect(await answerTo({ status: 599 })).toMatchObject({ status: 599, body: null });
  });

  it("an object that is not a plain object is no reply: 204", async () => {
    class Job {
      status = 202;
    }
    expect(await answerTo(new Job())).toMatchObject({ status: 204, body: null });
    const bare = Object.assign(Object.create(null), { status: 201 });
    expect(await answerTo(bare)).toMatchObject({ status: 201 });
    expect(await answerTo({ ok: true })).toMatchObject({ status: 204, close: null });
    expect(await answerTo("done")).toMatchObject({ status: 204 });
  });

  it.each([
    ["503", '"503"'],
    [600, '"600"'],
    [199, '"199"'],
    [503.5, '"503.5"'],
    ["x".repeat(100), `"${"x".repeat(39)}`],
  ])(
    "a reply whose status is %j is a handler failure (500), reported, and the retry runs the handler again",
    async (status, shown) => {
      let runs = 0;
      const errors: unknown[] = [];
      const receive = handler({
        dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 },
        onError: (e) => void errors.push(e),
        onEvent: () => (++runs === 1 ? { status } : undefined),
      });
      const text = body();
      expect(await seen(await receive(await request(text)))).toMatchObject({
        status: 500,
        body: error("handler_error", "the webhook handler failed"),
      });
      expect(errors).toEqual([
        new TypeError(
          `flag-webhooks: onEvent returned a reply whose status ${shown} is not a whole number from 200 to 599`,
        ),
      ]);
      // No 2xx went out, so the event is not handled: the sender's retry runs the handler again.
      const retry = await receive(await request(text));
      expect([retry.status, retry.headers.get("webhook-duplicate"), runs]).toEqual([204, null, 2]);
    },
  );

  it.each([
    ["bad header", "1", '"bad header"'],
    ["x-ok", "a\r\nset-cookie: x=1", '"x-ok"'],
    ["x-nul", "a\0b", '"x-nul"'],
    ["é", "1", '"é"'],
  ])("a reply header %j: %j cannot be sent: 500, reported", async (name, value, shown) => {
    const errors: unknown[] = [];
    const answer = await answerTo({ status: 200, headers: { [name]: value } }, { onError: (e) => void errors.push(e) });
    expect(answer.status).toBe(500);
    expect(errors).toEqual([
      new TypeError(`flag-webhooks: onEvent returned a reply header ${shown} that cannot be sent`),
    ]);
  });

  it("a Response is answered as it is", async () => {
    const response = new Response("made here", { status: 202, headers: { "x-own": "yes" } });
    const answer = await handler({ onEvent: () => response })(await request());
    expect(answer).toBe(response);
  });

  it("shows at most 40 characters of a reply header name that cannot be sent", async () => {
    const errors: unknown[] = [];
    const name = `${"x".repeat(45)} y`;
    const answer = await handler({
      onEvent: () => ({ status: 200, headers: { [name]: "1" } }),
      onError: (e) => void errors.push(e),
    })(await request());
    expect(answer.status).toBe(500);
    expect(errors).toEqual([
      new TypeError(`flag-webhooks: onEvent returned a reply header "${"x".repeat(40)}" that cannot be sent`),
    ]);
  });

  it("a reply without a body gets no content type", async () => {
    const answer = await seen(
      await handler({ onEvent: () => ({ status: 202, headers: { "x-run": "1" } }) })(await request()),
    );
    expect(answer).toMatchObject({ status: 202, type: null, body: null, close: null });
  });
});

describe("a reply that cannot be written releases the claim and answers our JSON 500", () => {
  it("fetch: a reply body JSON cannot serialise (a BigInt) is 500 handler_error, and the retry runs, not 409 for a lease", async () => {
    let runs = 0;
    const errors: unknown[] = [];
    const handler = webhookHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: (error) => errors.push(error),
      onEvent: () => {
        runs++;
        return runs === 1 ? { status: 200, body: { count: 1n } } : undefined;
      },
    });
    const d = await delivery(SECRET);
    const request = () =>
      new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers });
    // Not a rejection of handle() (the runtime would answer its own 500 and the claim would never be
    // settled, every retry a 409 for the whole inFlightTtl): our 500, and the claim released.
    const first = await handler(request()).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(Response);
    expect((first as Response).status).toBe(500);
    expect(((await (first as Response).json()) as { error: { code: string } }).error.code).toBe("handler_error");
    expect(errors).toHaveLength(1);
    const retry = await handler(request());
    expect(retry.status).toBe(204);
    expect(runs).toBe(2);
  });

  it("Lambda: the same reply body does not throw out of the handler", async () => {
    let runs = 0;
    const handler = lambdaHandler({
      secret: SECRET,
      dedupe: dedupe(),
      onError: quiet,
      onEvent: () => {
        runs++;
        return runs === 1 ? { status: 200, body: { count: 1n } } : undefined;
      },
    });
    const d = await delivery(SECRET);
    const event = { httpMethod: "POST", headers: d.headers, body: d.body };
    const context = { awsRequestId: "r", getRemainingTimeInMillis: () => 30_000 };
    const first = await handler(event, context).catch((error: unknown) => error);
    expect((first as { statusCode?: number }).statusCode).toBe(500);
    expect((await handler(event, context)).statusCode).toBe(204);
    expect(runs).toBe(2);
  });

  let server: Server | undefined;
  afterEach(async () => {
    await close(server);
    server = undefined;
  });

  it.each<[string, Record<string, string>]>([
    ["a header name Node refuses", { "bad name": "x" }],
    ["a header value with a newline", { "x-note": "a\nb" }],
  ])("Express: a reply with %s is not marked done while the sender gets a 500", async (_name, headers) => {
    let runs = 0;
    const http = expressServer(
      {
        secret: SECRET,
        dedupe: dedupe(),
        onError: quiet,
        onEvent: () => {
          runs++;
          return runs === 1 ? { status: 200, headers } : undefined;
        },
      },
      // Express's own error handler would print the TypeError's stack: answer it quietly instead.
      (app) =>
        app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
          res.status(500).end();
        }),
    );
    server = await listen(http);
    const d = await delivery(SECRET);
    // The sender saw no 2xx, so it retries: that retry must run the handler, not be a duplicate.
    expect((await post(server, d)).status).toBe(500);
    const retry = await post(server, d);
    expect([retry.status, retry.duplicate]).toEqual([204, null]);
    expect(runs).toBe(2);
  });
});

describe("another adapter's answer returned where it is not answered is a handler failure, not a 204", () => {
  const TYPE_ERROR = new TypeError(
    "flag-webhooks: onEvent returned a Response or a Lambda result, which this adapter does not answer with; return { status } instead",
  );
  let server: Server | undefined;
  afterEach(async () => {
    if (server) await close(server);
    server = undefined;
  });

  it.each<[string, () => unknown]>([
    ["a Lambda result", () => ({ statusCode: 503, body: "" })],
    ["a fetch Response", () => new Response(null, { status: 503 })],
  ])("Express, %s: 500, reported, and the retry runs the handler again", async (_name, make) => {
    const errors: unknown[] = [];
    let runs = 0;
    server = await listen(
      expressServer({
        secret: SECRET,
        dedupe: dedupe(),
        onError: (error) => void errors.push(error),
        onEvent: () => (++runs === 1 ? make() : undefined),
      }),
    );
    const d = await delivery(SECRET);
    const first = await post(server, d);
    expect([first.status, first.code]).toEqual([500, "handler_error"]);
    expect(errors).toEqual([TYPE_ERROR]);
    expect((await post(server, d)).status).toBe(204);
    expect(runs).toBe(2);
  });

  it("fetch, a Lambda result: 500; Lambda, a fetch Response: 500", async () => {
    const d = await delivery(SECRET);
    const errors: unknown[] = [];
    const fetchAnswer = await webhookHandler({
      secret: SECRET,
      onError: (error) => void errors.push(error),
      onEvent: () => ({ statusCode: 200 }),
    })(new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers }));
    expect(fetchAnswer.status).toBe(500);
    const lambdaAnswer = await lambdaHandler({
      secret: SECRET,
      onError: (error) => void errors.push(error),
      onEvent: () => new Response(null, { status: 200 }),
    })({ httpMethod: "POST", headers: d.headers, body: d.body } as never, {} as never);
    expect(lambdaAnswer.statusCode).toBe(500);
    expect(errors).toEqual([TYPE_ERROR, TYPE_ERROR]);
  });

  it("a reply with both status and statusCode is a WebhookReply, answered by its status", async () => {
    const d = await delivery(SECRET);
    const answer = await webhookHandler({ secret: SECRET, onEvent: () => ({ status: 202, statusCode: 500 }) })(
      new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers }),
    );
    expect(answer.status).toBe(202);
  });
});
