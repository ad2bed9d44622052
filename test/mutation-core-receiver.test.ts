import { createHmac, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { verifyRequest, type WebhookHandlerOptions, webhookHandler } from "../src/adapters/fetch.js";
import { webhookHandler as lambdaHandler } from "../src/adapters/lambda.js";
import { type DedupeStore, MemoryDedupeStore, SIGNATURE_HEADER, WebhookError } from "../src/index.js";

// The receiver's decisions as a fetch user sees them (real Request and Response objects): the
// exact answer to each refusal (status, code, message, headers), the option checks, what a reply
// returned by onEvent becomes, and when dedupe marks, releases or leaves an id. Written against
// the survivors of the receiver's mutation run (issue 20, part 4).

const secret = "receiver-edges-secret";
const JSON_TYPE = "application/json; charset=utf-8";

function body(id = `evt_${randomUUID()}`, createdAt = new Date().toISOString()): string {
  return JSON.stringify({
    id,
    type: "flag.updated",
    createdAt,
    environment: "production",
    data: { flag: "f", changes: [], actor: { type: "user", email: "a@example.com" } },
  });
}
const sign = (text: string) => createHmac("sha256", secret).update(text).digest("hex");

function request(text = body(), init: { method?: string; headers?: Record<string, string> } = {}): Request {
  const { method = "POST", headers = { [SIGNATURE_HEADER]: sign(text) } } = init;
  return new Request("http://localhost/webhooks", { method, headers, body: method === "POST" ? text : undefined });
}

type Options = Partial<WebhookHandlerOptions>;
const handler = (options: Options) =>
  webhookHandler({ secret, onEvent: () => {}, onError: () => {}, ...options } as WebhookHandlerOptions);

/** A response as a comparable value: status, the headers that matter, and the body. */
async function seen(response: Response) {
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    close: response.headers.get("connection"),
    allow: response.headers.get("allow"),
    retryAfter: response.headers.get("retry-after"),
    duplicate: response.headers.get("webhook-duplicate"),
    body: text === "" ? null : text.startsWith("{") ? JSON.parse(text) : text,
  };
}
const error = (code: string, message: string) => ({ error: { code, message } });
const refusal = { type: JSON_TYPE, close: null, allow: null, retryAfter: null, duplicate: null };

/** A MemoryDedupeStore that records the calls made to it. */
function recordingStore(store: DedupeStore = new MemoryDedupeStore()) {
  const calls: string[] = [];
  return {
    calls,
    claim(id: string, lease: number) {
      calls.push(`claim ${lease}`);
      return store.claim(id, lease);
    },
    complete(id: string, ttl: number) {
      calls.push(`complete ${ttl}`);
      return store.complete(id, ttl);
    },
    release(id: string) {
      calls.push("release");
      return store.release(id);
    },
  } satisfies DedupeStore & { calls: string[] };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("refusals: status, error body and headers", () => {
  it("405 to another method, with Allow: POST, closing the connection", async () => {
    const answer = await seen(await handler({})(request(body(), { method: "PUT" })));
    expect(answer).toEqual({
      ...refusal,
      status: 405,
      allow: "POST",
      close: "close",
      body: error("method_not_allowed", "method PUT not allowed: deliveries are POST"),
    });
  });

  it("401 missing_signature closes the connection, unread; a wrong one does not", async () => {
    const missing = await seen(await handler({})(request(body(), { headers: {} })));
    expect(missing).toEqual({
      ...refusal,
      status: 401,
      close: "close",
      body: error("missing_signature", `missing ${SIGNATURE_HEADER} header`),
    });
    const wrong = await seen(await handler({})(request(body(), { headers: { [SIGNATURE_HEADER]: "0".repeat(64) } })));
    expect(wrong).toEqual({
      ...refusal,
      status: 401,
      body: error("invalid_signature", `${SIGNATURE_HEADER} header is not the HMAC-SHA256 of the body`),
    });
  });

  it("413 past the limit, closing the connection", async () => {
    const answer = await seen(await handler({ limit: 10 })(request()));
    expect(answer).toEqual({
      ...refusal,
      status: 413,
      close: "close",
      body: error("payload_too_large", "body is larger than the limit of 10 bytes"),
    });
  });

  it("a string body (Lambda's) is measured and verified as UTF-8 bytes", async () => {
    // 40 characters of "é" are 80 bytes: over a limit of 60 although the string has 40 units.
    const text = "é".repeat(40);
    const invoke = (limit: number) =>
      lambdaHandler({ secret, limit, onEvent: () => {} })(
        { httpMethod: "POST", headers: { [SIGNATURE_HEADER]: sign(text) }, body: text } as never,
        {} as never,
      );
    const over = await invoke(60);
    expect([over.statusCode, JSON.parse(over.body ?? "")]).toEqual([
      413,
      error("payload_too_large", "body is larger than the limit of 60 bytes"),
    ]);
    // Within the limit, the signature over the UTF-8 bytes matches: refused only as no JSON.
    const within = await invoke(80);
    expect([within.statusCode, JSON.parse(within.body ?? "").error.code]).toEqual([400, "invalid_payload"]);
  });

  it("refuses a missing signature before reading the body: no 413 for an unsigned oversized body", async () => {
    const answer = await seen(await handler({ limit: 10 })(request(body(), { headers: {} })));
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(error("missing_signature", `missing ${SIGNATURE_HEADER} header`));
  });

  it("tells an invocation that is no HTTP request why it gets 405", async () => {
    const result = await lambdaHandler({ secret, onEvent: () => {} })({ Records: [] } as never, {} as never);
    expect(result.statusCode).toBe(405);
    expect(JSON.parse(result.body ?? "").error.message).toMatch(
      /^this invocation is not an HTTP request: it is a batch/,
    );
  });

  it("verifyRequest tells onRejected of each refusal, and throws it", async () => {
    const rejected: string[] = [];
    const onRejected = (e: WebhookError) => void rejected.push(e.code);
    await expect(verifyRequest(request(body(), { headers: {} }), { secret, onRejected })).rejects.toMatchObject({
      code: "missing_signature",
    });
    const event = await verifyRequest(request(body("evt_ok")), { secret, onRejected });
    expect(event.id).toBe("evt_ok");
    expect(rejected).toEqual(["missing_signature"]);
    await expect(verifyRequest(request(body(), { headers: {} }), { secret })).rejects.toMatchObject({
      code: "missing_signature",
    });
  });

  it("500 handler_error without the thrown message, which goes to onError", async () => {
    const errors: unknown[] = [];
    const thrown = new Error("database password is hunter2");
    const answer = await seen(
      await handler({ onEvent: () => Promise.reject(thrown), onError: (e) => void errors.push(e) })(request()),
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
      })(request()),
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
    const first = receive(request(text));
    await vi.waitFor(() => expect(store.size).toBe(1));
    const busy = await seen(await receive(request(text)));
    expect(busy).toEqual({
      ...refusal,
      status: 409,
      retryAfter: "5",
      body: error("delivery_in_progress", "event evt_busy is being handled by another delivery; retry later"),
    });
    release();
    expect((await first).status).toBe(204);
    const copy = await seen(await receive(request(text)));
    expect(copy).toEqual({ ...refusal, type: null, status: 204, duplicate: "true", body: null });
  });

  it("503 store_unavailable when the store throws, with Retry-After: 10 and the cause reported", async () => {
    const errors: unknown[] = [];
    const broken = new Error("ECONNREFUSED");
    const store = { ...recordingStore(), claim: () => Promise.reject(broken) };
    const answer = await seen(
      await handler({ dedupe: { store, ttl: "1h" }, onError: (e) => void errors.push(e) })(request()),
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

describe("what a refusal tells the hooks", () => {
  it("a refusal is not an error: without onRejected, onError hears nothing", async () => {
    const errors: unknown[] = [];
    const answer = await handler({ onError: (e) => void errors.push(e) })(request(body(), { headers: {} }));
    expect(answer.status).toBe(401);
    expect(errors).toEqual([]);
  });

  it("store_unavailable carries the store's error as its cause", async () => {
    const rejected: WebhookError[] = [];
    const broken = new Error("ECONNRESET");
    const store = { ...recordingStore(), claim: () => Promise.reject(broken) };
    await handler({ dedupe: { store, ttl: "1h" }, onRejected: (e) => void rejected.push(e) })(request());
    expect(rejected.map((e) => [e.code, e.cause])).toEqual([["store_unavailable", broken]]);
  });

  it.each<[unknown, string]>([
    ["yes", '"yes"'],
    [42, "42"],
    [null, "null"],
    [undefined, "undefined"],
  ])("a claim() answering %j is reported as such, and answered 503", async (value, shown) => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), claim: () => value as never };
    const answer = await handler({ dedupe: { store, ttl: "1h" }, onError: (e) => void errors.push(e) })(request());
    expect(answer.status).toBe(503);
    expect(errors).toEqual([
      new TypeError(
        `flag-webhooks: the dedupe store's claim() answered ${shown}, not "claimed", "in_flight" or "done"`,
      ),
    ]);
  });

  it("a Lambda result whose statusCode is no HTTP status is a handler failure (500), reported", async () => {
    const errors: unknown[] = [];
    const text = body();
    const result = await lambdaHandler({
      secret,
      onEvent: () => ({ statusCode: 99, body: "" }),
      onError: (e) => void errors.push(e),
    })({ httpMethod: "POST", headers: { [SIGNATURE_HEADER]: sign(text) }, body: text } as never, {} as never);
    expect(result.statusCode).toBe(500);
    expect(errors).toEqual([
      new TypeError("flag-webhooks: onEvent returned a result with no valid HTTP status to answer with"),
    ]);
  });
});

describe("options, checked when the handler is created", () => {
  const make = (options: unknown) => () => webhookHandler(options as WebhookHandlerOptions);

  it("needs an options object", () => {
    for (const options of [undefined, null, "secret"]) {
      expect(make(options)).toThrow(new TypeError('flag-webhooks: options with a "secret" are required'));
    }
  });

  it.each(["onError", "onVerified", "onRejected", "now"])("names %s when it is not a function", (name) => {
    expect(make({ secret, onEvent: () => {}, [name]: "nope" })).toThrow(
      new TypeError(`flag-webhooks: option "${name}" must be a function`),
    );
  });

  it.each([{}, null, { delivery: "x" }])("refuses telemetry %j", (telemetry) => {
    expect(make({ secret, onEvent: () => {}, telemetry })).toThrow(
      new TypeError('flag-webhooks: option "telemetry" must be a Telemetry, such as openTelemetry()'),
    );
  });

  it("refuses a dedupe store without claim, complete and release", () => {
    const full = new MemoryDedupeStore();
    for (const store of [
      undefined,
      {},
      { ...recordingStore(full), claim: undefined },
      { ...recordingStore(full), complete: "x" },
      { ...recordingStore(full), release: null },
    ]) {
      expect(make({ secret, onEvent: () => {}, dedupe: { store, ttl: 1000 } })).toThrow(
        new TypeError('flag-webhooks: option "dedupe.store" must be a DedupeStore (claim, complete, release)'),
      );
    }
    expect(make({ secret, onEvent: () => {}, dedupe: undefined })).not.toThrow();
  });

  it("requires dedupe.ttl, and one at least maxAge plus twice the minute of skew", () => {
    const store = new MemoryDedupeStore();
    expect(make({ secret, onEvent: () => {}, dedupe: { store } })).toThrow(
      new TypeError('flag-webhooks: option "dedupe.ttl" is required'),
    );
    expect(make({ secret, onEvent: () => {}, maxAge: "5m", dedupe: { store, ttl: 420_000 } })).not.toThrow();
    expect(make({ secret, onEvent: () => {}, maxAge: "5m", dedupe: { store, ttl: 419_999 } })).toThrow(
      new TypeError(
        'flag-webhooks: option "dedupe.ttl" (419999 ms) is shorter than maxAge plus twice the 60 s clock-skew allowance ' +
          "(420000 ms): a captured delivery could be replayed after its id is forgotten, by a receiver whose clock is " +
          "behind the one that handled it; make it at least that long",
      ),
    );
  });

  it.each([
    ["dedupe.inFlightTtl", { inFlightTtl: "soon" }, "soon"],
    ["dedupe.timeout", { timeout: -1 }, -1],
    ["dedupe.ttl", { ttl: "forever" }, "forever"],
  ])("names %s when it is no duration", (name, extra, value) => {
    const dedupe = { store: new MemoryDedupeStore(), ttl: "1h", ...extra };
    expect(make({ secret, onEvent: () => {}, dedupe })).toThrow(
      new TypeError(
        `flag-webhooks: option "${name}" must be a positive number of milliseconds or a duration such as "5m", got ${JSON.stringify(value)}`,
      ),
    );
  });

  it("names maxAge when it is no duration, and takes dedupe: null as a mistake, not as no dedupe", () => {
    expect(make({ secret, onEvent: () => {}, maxAge: "a while" })).toThrow(
      new TypeError(
        'flag-webhooks: option "maxAge" must be a positive number of milliseconds or a duration such as "5m", got "a while"',
      ),
    );
    expect(make({ secret, onEvent: () => {}, dedupe: null })).toThrow(
      new TypeError('flag-webhooks: option "dedupe.store" must be a DedupeStore (claim, complete, release)'),
    );
  });

  it("names bodyTimeout when it is no duration", () => {
    expect(make({ secret, onEvent: () => {}, bodyTimeout: "later" })).toThrow(
      /option "bodyTimeout" must be a positive/,
    );
  });
});

describe("what onEvent returns", () => {
  const answerTo = async (value: unknown, options: Options = {}) =>
    seen(await handler({ onEvent: () => value, ...options })(request()));

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
    const text = await handler({ onEvent: () => ({ status: 200, body: "ok" }) })(request());
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
  ])("a reply whose status is %j is a handler failure (500), reported", async (status, shown) => {
    const errors: unknown[] = [];
    expect(await answerTo({ status }, { onError: (e) => void errors.push(e) })).toMatchObject({
      status: 500,
      body: error("handler_error", "the webhook handler failed"),
    });
    expect(errors).toEqual([
      new TypeError(
        `flag-webhooks: onEvent returned a reply whose status ${shown} is not a whole number from 200 to 599`,
      ),
    ]);
  });

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
    const answer = await handler({ onEvent: () => response })(request());
    expect(answer).toBe(response);
  });
});

describe("dedupe: what marks an id handled", () => {
  const run = async (reply: unknown, options: Options = {}) => {
    const store = recordingStore();
    const receive = handler({ dedupe: { store, ttl: 3_600_000 }, onEvent: () => reply, ...options });
    const text = body();
    const first = await receive(request(text));
    const second = await receive(request(text));
    return { first: first.status, second: second.status, duplicate: second.headers.get("webhook-duplicate"), store };
  };

  it.each([200, 204, 299])("a %i reply marks the id done: a copy is a duplicate", async (status) => {
    const result = await run(status === 204 ? undefined : { status });
    expect(result).toMatchObject({ first: status, second: 204, duplicate: "true" });
    expect(result.store.calls).toEqual(["claim 60000", "complete 3600000", "claim 60000"]);
  });

  it.each([300, 404, 503])("a %i reply releases the claim: a copy runs again", async (status) => {
    const result = await run({ status });
    expect(result).toMatchObject({ first: status, second: status, duplicate: null });
    expect(result.store.calls).toEqual(["claim 60000", "release", "claim 60000", "release"]);
  });

  it("a Response of 2xx marks it done, one of 5xx releases it", async () => {
    expect(await run(new Response(null, { status: 201 }))).toMatchObject({ first: 201, duplicate: "true" });
    expect(await run(new Response(null, { status: 500 }))).toMatchObject({ first: 500, second: 500 });
  });

  it("passes the lease and ttl given as durations", async () => {
    const store = recordingStore();
    await handler({ dedupe: { store, ttl: "2h", inFlightTtl: "90s" } })(request());
    expect(store.calls).toEqual(["claim 90000", "complete 7200000"]);
  });

  it("runs the handler without dedupe when the store is down and failOpen is true, and only then", async () => {
    const store = { ...recordingStore(), claim: () => Promise.reject(new Error("down")) };
    const ran: string[] = [];
    const onEvent = (event: { id: string }) => void ran.push(event.id);
    const open = await handler({ dedupe: { store, ttl: "1h", failOpen: true }, onEvent: onEvent as never })(request());
    expect(open.status).toBe(204);
    expect(ran).toHaveLength(1);
    const shut = await handler({ dedupe: { store, ttl: "1h", failOpen: "yes" as never }, onEvent: onEvent as never })(
      request(),
    );
    expect(shut.status).toBe(503);
    expect(ran).toHaveLength(1);
  });

  it("a store that never answers a claim gets 503 after dedupe.timeout, and a claim landing late is released", async () => {
    const released: string[] = [];
    let land: (result: string) => void = () => {};
    const store = {
      claim: () =>
        new Promise<string>((resolve) => {
          land = resolve;
        }),
      complete: () => {},
      release: (id: string) => void released.push(id),
    };
    const errors: unknown[] = [];
    const answer = await handler({
      dedupe: { store: store as never, ttl: "1h", timeout: 30 },
      onError: (e) => void errors.push(e),
    })(request(body("evt_late")));
    expect(answer.status).toBe(503);
    expect(errors).toEqual([new Error("the dedupe store did not answer within 30 ms")]);
    land("claimed");
    await vi.waitFor(() => expect(released).toEqual(["evt_late"]));
  });

  it("a claim landing late that did not claim is left alone", async () => {
    const released: string[] = [];
    let land: (result: string) => void = () => {};
    const store = {
      claim: () =>
        new Promise<string>((resolve) => {
          land = resolve;
        }),
      complete: () => {},
      release: (id: string) => void released.push(id),
    };
    const answer = await handler({ dedupe: { store: store as never, ttl: "1h", timeout: 30 } })(request());
    expect(answer.status).toBe(503);
    land("in_flight");
    await sleep(20);
    expect(released).toEqual([]);
  });

  it("takes any thenable from a store, not only a native Promise", async () => {
    const memory = new MemoryDedupeStore();
    // biome-ignore lint/suspicious/noThenProperty: a thenable that is no Promise is the point here.
    const thenable = <T>(value: T) => ({ then: (resolve: (v: T) => void) => resolve(value) });
    const store = {
      claim: (id: string, lease: number) => thenable(memory.claim(id, lease)),
      complete: (id: string, ttl: number) => thenable(memory.complete(id, ttl)),
      release: (id: string) => thenable(memory.release(id)),
    };
    const receive = handler({ dedupe: { store: store as never, ttl: "1h" } });
    const text = body();
    expect((await receive(request(text))).status).toBe(204);
    expect((await receive(request(text))).headers.get("webhook-duplicate")).toBe("true");
  });

  it("takes a thenable that is a function, as Promise.resolve does", async () => {
    const memory = new MemoryDedupeStore();
    const callable = <T>(value: T) =>
      // biome-ignore lint/suspicious/noThenProperty: a callable thenable is the point here.
      Object.assign(() => {}, { then: (resolve: (v: T) => void) => resolve(value) });
    const store = {
      claim: (id: string, lease: number) => callable(memory.claim(id, lease)),
      complete: (id: string, ttl: number) => callable(memory.complete(id, ttl)),
      release: (id: string) => callable(memory.release(id)),
    };
    const errors: unknown[] = [];
    const receive = handler({ dedupe: { store: store as never, ttl: "1h" }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(request(text))).status).toBe(204);
    expect((await receive(request(text))).headers.get("webhook-duplicate")).toBe("true");
    expect(errors).toEqual([]);
  });

  it("gives a store that answers slowly the whole dedupe.timeout to mark an id done", async () => {
    const memory = new MemoryDedupeStore();
    const calls: string[] = [];
    const store = {
      ...recordingStore(memory),
      complete: async (id: string, ttl: number) => {
        calls.push("complete");
        await sleep(20);
        return memory.complete(id, ttl);
      },
    };
    const errors: unknown[] = [];
    const receive = handler({ dedupe: { store, ttl: "1h", timeout: 5000 }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(request(text))).status).toBe(204);
    expect((await receive(request(text))).headers.get("webhook-duplicate")).toBe("true");
    expect([calls, errors]).toEqual([["complete"], []]);
  });

  it("retries marking an id done when the store fails once, so a copy is still a duplicate", async () => {
    const memory = new MemoryDedupeStore();
    let failures = 1;
    const errors: unknown[] = [];
    const store = {
      ...recordingStore(memory),
      complete: (id: string, ttl: number) => {
        if (failures-- > 0) return Promise.reject(new Error("READONLY"));
        return memory.complete(id, ttl);
      },
    };
    const receive = handler({ dedupe: { store, ttl: "1h", timeout: 1000 }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(request(text))).status).toBe(204);
    expect((await receive(request(text))).headers.get("webhook-duplicate")).toBe("true");
    expect(errors).toEqual([]);
  });

  it.each([
    // 25 ms, doubled each time up to 250 ms, while the pause still fits in dedupe.timeout.
    [1000, [0, 25, 75, 175, 375, 625, 875]],
    // A pause that would end exactly at the deadline is not taken.
    [625, [0, 25, 75, 175, 375]],
  ])("backs off between attempts to mark an id done: within %i ms, attempts at %j ms", async (timeout, times) => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const attempts: number[] = [];
      const began = performance.now();
      const store = {
        ...recordingStore(),
        complete: () => {
          attempts.push(performance.now() - began);
          return Promise.reject(new Error("READONLY"));
        },
      };
      const errors: unknown[] = [];
      const answer = handler({ dedupe: { store, ttl: "1h", timeout }, onError: (e) => void errors.push(e) })(request());
      await vi.advanceTimersByTimeAsync(timeout + 500);
      expect((await answer).status).toBe(204);
      expect(attempts).toEqual(times);
      expect(errors).toEqual([new Error("READONLY")]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports a store that keeps failing to mark an id done, and still answers 204", async () => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), complete: () => Promise.reject(new Error("READONLY")) };
    const answer = await handler({ dedupe: { store, ttl: "1h", timeout: 60 }, onError: (e) => void errors.push(e) })(
      request(),
    );
    expect(answer.status).toBe(204);
    expect(errors).toEqual([new Error("READONLY")]);
  });

  it("does not release a claim whose lease ran out while the handler failed: another copy may hold it", async () => {
    const store = recordingStore();
    const answer = await handler({
      dedupe: { store, ttl: "1h", inFlightTtl: 20 },
      onEvent: async () => {
        await sleep(40);
        throw new Error("slow and failed");
      },
    })(request());
    expect(answer.status).toBe(500);
    expect(store.calls).toEqual(["claim 20"]);
  });

  it("releases a claim when a handler fails within its lease", async () => {
    const store = recordingStore();
    const answer = await handler({
      dedupe: { store, ttl: "1h" },
      onEvent: () => {
        throw new Error("failed");
      },
    })(request());
    expect(answer.status).toBe(500);
    expect(store.calls).toEqual(["claim 60000", "release"]);
  });

  it("reports a release that fails and still answers the handler's failure", async () => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), release: () => Promise.reject(new Error("gone")) };
    const answer = await handler({
      dedupe: { store, ttl: "1h" },
      onEvent: () => ({ status: 503 }),
      onError: (e) => void errors.push(e),
    })(request());
    expect(answer.status).toBe(503);
    expect(errors).toEqual([new Error("gone")]);
  });

  it("waits dedupe.timeout for a release that never answers, then reports it and answers", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const errors: unknown[] = [];
      const store = { ...recordingStore(), release: () => new Promise<void>(() => {}) };
      let status: number | undefined;
      const answer = handler({
        dedupe: { store, ttl: "1h", timeout: 300 },
        onEvent: () => ({ status: 503 }),
        onError: (e) => void errors.push(e),
      })(request()).then((response) => {
        status = response.status;
      });
      await vi.advanceTimersByTimeAsync(299);
      expect(status).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      await answer;
      expect(status).toBe(503);
      expect(errors).toEqual([new Error("the dedupe store did not answer within 300 ms")]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("hooks and the clock", () => {
  it("the default onError writes one line: name and message, newlines folded", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const receive = webhookHandler({
      secret,
      onEvent: () => {
        throw new TypeError("first line\n   second line\r\nthird");
      },
    });
    expect((await receive(request())).status).toBe(500);
    expect(log.mock.calls).toEqual([
      ["flag-webhooks: TypeError: first line second line third (onEvent, a hook or the dedupe store failed)"],
    ]);
    log.mockClear();
    const thrower = webhookHandler({
      secret,
      onEvent: () => {
        throw "plain text";
      },
    });
    expect((await thrower(request())).status).toBe(500);
    expect(log.mock.calls).toEqual([
      ["flag-webhooks: thrown value: plain text (onEvent, a hook or the dedupe store failed)"],
    ]);
  });

  it("a hook that throws changes no answer, and is reported; an onError that throws too is swallowed", async () => {
    const errors: unknown[] = [];
    const hookError = new Error("metrics down");
    const verified = await handler({
      onVerified: () => {
        throw hookError;
      },
      onError: (e) => void errors.push(e),
    })(request());
    expect(verified.status).toBe(204);
    expect(errors).toEqual([hookError]);
    const rejected = await handler({
      onRejected: () => {
        throw hookError;
      },
      onError: () => {
        throw new Error("and the logger too");
      },
    })(request(body(), { headers: {} }));
    expect(rejected.status).toBe(401);
  });

  it("onVerified is told the index of the secret that matched", async () => {
    const told: number[] = [];
    await handler({ secret: ["newer", secret], onVerified: (_e, info) => void told.push(info.secretIndex) })(request());
    expect(told).toEqual([1]);
  });

  it.each([
    [() => Number.NaN, "NaN"],
    [() => "2026", "string"],
    [() => undefined, "undefined"],
  ])("a clock that names no instant fails closed: 500, and onError hears why", async (now, shown) => {
    const errors: unknown[] = [];
    const ran = vi.fn();
    const answer = await handler({
      maxAge: "5m",
      now: now as never,
      onEvent: ran,
      onError: (e) => void errors.push(e),
    })(request());
    expect(answer.status).toBe(500);
    expect(ran).not.toHaveBeenCalled();
    expect(errors).toEqual([
      new TypeError(`flag-webhooks: option "now" must return a finite number of ms since the epoch, got ${shown}`),
    ]);
  });

  it("the clock is read for the replay window only", async () => {
    const now = vi.fn(() => Date.now());
    await handler({ now })(request());
    expect(now).not.toHaveBeenCalled();
    await handler({ now, maxAge: "5m" })(request());
    expect(now).toHaveBeenCalledTimes(1);
  });
});

describe("more edges the receiver's mutation run left", () => {
  /** A Telemetry that writes down what each delivery tells it. */
  function recordingTelemetry() {
    const log: string[] = [];
    return {
      log,
      telemetry: {
        delivery: () => ({
          verified: () => void log.push("verified"),
          store: (operation: string) => void log.push(`store ${operation}`),
          run: <T>(fn: () => T) => fn(),
          handler: () => void log.push("handler"),
          end: (outcome: string, status: number | undefined) => void log.push(`end ${outcome} ${status}`),
        }),
      },
    };
  }

  it("telemetry hears a refusal that is no WebhookError as handler_error 500", async () => {
    const { log, telemetry } = recordingTelemetry();
    const answer = await handler({ telemetry, maxAge: "5m", now: () => Number.NaN })(request());
    expect(answer.status).toBe(500);
    expect(log).toEqual(["verified", "end handler_error 500"]);
  });

  it("telemetry hears a reply that cannot be sent as the 500 the client gets", async () => {
    const { log, telemetry } = recordingTelemetry();
    const answer = await handler({ telemetry, onEvent: () => ({ status: 600 }) })(request());
    expect(answer.status).toBe(500);
    expect(log).toEqual(["verified", "handler", "end handler_error 500"]);
  });

  it("telemetry hears the claim of a store that fails, and the complete of one that keeps failing", async () => {
    const down = recordingTelemetry();
    const store = { ...recordingStore(), claim: () => Promise.reject(new Error("down")) };
    await handler({ telemetry: down.telemetry, dedupe: { store, ttl: "1h" } })(request());
    expect(down.log).toEqual(["verified", "store claim", "end store_unavailable 503"]);
    const readonly = recordingTelemetry();
    const failing = { ...recordingStore(), complete: () => Promise.reject(new Error("READONLY")) };
    await handler({ telemetry: readonly.telemetry, dedupe: { store: failing, ttl: "1h", timeout: 40 } })(request());
    expect(readonly.log).toEqual(["verified", "store claim", "handler", "store complete", "end handled 204"]);
  });

  it("verifyRequest tells onRejected of WebhookErrors only, and logs nothing without it", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    await expect(verifyRequest(request(body(), { headers: {} }), { secret })).rejects.toBeInstanceOf(WebhookError);
    expect(log).not.toHaveBeenCalled();
    const rejected: unknown[] = [];
    const clockless = verifyRequest(request(), {
      secret,
      maxAge: "5m",
      now: () => Number.NaN,
      onRejected: (e) => void rejected.push(e),
    });
    await expect(clockless).rejects.toBeInstanceOf(TypeError);
    expect(rejected).toEqual([]);
  });

  it("a store that answers complete() after the timeout is reported once, and its late answer ignored", async () => {
    const errors: unknown[] = [];
    const memory = new MemoryDedupeStore();
    const store = {
      ...recordingStore(memory),
      complete: (id: string, ttl: number) => sleep(120).then(() => memory.complete(id, ttl)),
    };
    const answer = await handler({ dedupe: { store, ttl: "1h", timeout: 30 }, onError: (e) => void errors.push(e) })(
      request(),
    );
    expect(answer.status).toBe(204);
    await sleep(150); // the late answers arrive, and must throw nowhere
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toMatch(/^the dedupe store did not answer within [\d.]+ ms$/);
  });

  it("a claim() answering an object is named as text", async () => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), claim: () => ({ state: "claimed" }) as never };
    await handler({ dedupe: { store, ttl: "1h" }, onError: (e) => void errors.push(e) })(request());
    expect(errors).toEqual([
      new TypeError(
        `flag-webhooks: the dedupe store's claim() answered [object Object], not "claimed", "in_flight" or "done"`,
      ),
    ]);
  });

  it("shows at most 40 characters of a reply header name that cannot be sent", async () => {
    const errors: unknown[] = [];
    const name = `${"x".repeat(45)} y`;
    const answer = await handler({
      onEvent: () => ({ status: 200, headers: { [name]: "1" } }),
      onError: (e) => void errors.push(e),
    })(request());
    expect(answer.status).toBe(500);
    expect(errors).toEqual([
      new TypeError(`flag-webhooks: onEvent returned a reply header "${"x".repeat(40)}" that cannot be sent`),
    ]);
  });

  it("a reply without a body gets no content type", async () => {
    const answer = await seen(
      await handler({ onEvent: () => ({ status: 202, headers: { "x-run": "1" } }) })(request()),
    );
    expect(answer).toMatchObject({ status: 202, type: null, body: null, close: null });
  });

  it("releases a claim when a handler fails within a short lease", async () => {
    const store = recordingStore();
    await handler({ dedupe: { store, ttl: "1h", inFlightTtl: "2s" }, onEvent: () => ({ status: 500 }) })(request());
    expect(store.calls).toEqual(["claim 2000", "release"]);
  });
});
