import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import {
  type LambdaContext,
  type LambdaProxyEvent,
  type LambdaProxyEventV1,
  type LambdaProxyEventV2,
  type LambdaProxyResult,
  webhookHandler,
} from "flag-webhooks/lambda";
import { createEvent } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { buildCases, SECRET as CASES_SECRET, type DeliveryCase, LIMIT, SECRETS } from "../support/cases.js";
import { signatureOf } from "../support/deliveries.js";
import { vector } from "../support/vectors.js";

// The Lambda handler fed the events AWS documents (test/fixtures/lambda/, see its README), and the
// shared case table converted into REST API (v1) and HTTP API / function URL (v2) events, with
// the body as text and as base64.

const fixtures = join(import.meta.dirname, "../fixtures/lambda");
const fixture = <T>(name: string): T => JSON.parse(readFileSync(join(fixtures, `${name}.json`), "utf8")) as T;
const FIXTURES = ["rest-api-v1", "http-api-v1", "http-api-v2", "function-url"] as const;

const compact = vector("flag-updated-compact");
const cases = await buildCases();
const options = { secret: SECRETS, limit: LIMIT };
const context: LambdaContext = {
  awsRequestId: "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
  getRemainingTimeInMillis: () => 3000,
};

/** The handler the case table runs against: the application answers 200 with the event it got. */
const handler = webhookHandler({ ...options, onEvent: (event) => ({ status: 200, body: { received: event } }) });

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
function isUtf8Text(bytes: Buffer): boolean {
  try {
    return Buffer.from(strictUtf8.decode(bytes), "utf8").equals(bytes);
  } catch {
    return false;
  }
}

/** A case as API Gateway would hand it over: the body as text (when it is text) or base64. */
function bodyFields(c: DeliveryCase, base64: boolean) {
  if ((c.method ?? "POST") === "GET") return { body: null, isBase64Encoded: false };
  return base64
    ? { body: c.body.toString("base64"), isBase64Encoded: true }
    : // API Gateway decodes a text body; a body that is not UTF-8 is decoded lossily.
      { body: new TextDecoder().decode(c.body), isBase64Encoded: false };
}

/** A REST API event: headers in the client's case, `headers` keeping the last value of a repeat. */
function toV1(c: DeliveryCase, base64: boolean): LambdaProxyEventV1 {
  const event = fixture<LambdaProxyEventV1>("rest-api-v1");
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(c.headers)) {
    const values = Array.isArray(value) ? value : [value];
    headers[name] = values.at(-1) as string;
    multiValueHeaders[name] = values;
  }
  return { ...event, httpMethod: c.method ?? "POST", headers, multiValueHeaders, ...bodyFields(c, base64) };
}

/** An HTTP API 2.0 event: lowercase names, a repeated header's values joined with commas. */
function toV2(c: DeliveryCase, base64: boolean): LambdaProxyEventV2 {
  const event = fixture<LambdaProxyEventV2 & { requestContext: { http: Record<string, string> } }>("http-api-v2");
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(c.headers)) {
    headers[name.toLowerCase()] = (Array.isArray(value) ? value : [value]).join(",");
  }
  const { body, isBase64Encoded } = bodyFields(c, base64);
  return {
    ...event,
    headers,
    requestContext: { ...event.requestContext, http: { ...event.requestContext.http, method: c.method ?? "POST" } },
    ...(body === null ? { body: undefined } : { body }),
    isBase64Encoded,
  };
}

function expectResult(c: DeliveryCase, result: LambdaProxyResult, expected = { status: c.status, code: c.code }): void {
  expect(typeof result.statusCode).toBe("number");
  expect(typeof result.body).toBe("string");
  expect(result.statusCode).toBe(expected.status);
  expect(result.headers?.allow).toBe(expected.code === "method_not_allowed" ? "POST" : undefined);
  const json = JSON.parse(result.body);
  if (expected.code) {
    expect(json).toEqual({ error: { code: expected.code, message: expect.any(String) } });
    expect(result.headers?.["content-type"]).toBe("application/json; charset=utf-8");
    expect(result.body).not.toContain(CASES_SECRET);
    expect(result.body).not.toContain(SECRETS[0]);
  } else {
    expect(json.received.type).toBe(c.eventType);
    expect(json.received.id).toBe("evt_01HZX3K9");
  }
}

const shapes = [
  { name: "REST API (v1) event, text body", make: (c: DeliveryCase) => toV1(c, false), text: true },
  { name: "REST API (v1) event, base64 body", make: (c: DeliveryCase) => toV1(c, true), text: false },
  { name: "HTTP API 2.0 event, text body", make: (c: DeliveryCase) => toV2(c, false), text: true },
  { name: "HTTP API 2.0 event, base64 body", make: (c: DeliveryCase) => toV2(c, true), text: false },
];

describe.each(shapes)("the case table as a $name", ({ make, text }) => {
  it.each(cases)("$name", async (c) => {
    // Only base64 carries bytes that are not UTF-8: as decoded text, such a body is no longer the
    // one that was signed, so it cannot reach the 400 the other adapters answer.
    const expected =
      text && !isUtf8Text(c.body) ? { status: 401, code: "invalid_signature" } : { status: c.status, code: c.code };
    expectResult(c, await handler(make(c), context), expected);
  });

  it("keeps serving valid deliveries after every hostile event in the table", async () => {
    for (const c of cases) await handler(make(c), context);
    expectResult(cases[0] as DeliveryCase, await handler(make(cases[0] as DeliveryCase), context));
  });
});

describe("the documented event shapes", () => {
  it.each(FIXTURES)(
    "answers 204 to the signed delivery in %s and hands onEvent the event, the Lambda event and the context",
    async (name) => {
      const seen: [WebhookEvent, LambdaProxyEvent, LambdaContext][] = [];
      const lambda = webhookHandler({ secret: compact.secret, onEvent: (...args) => void seen.push(args) });
      const event = fixture<LambdaProxyEvent>(name);
      const result = await lambda(event, context);
      expect(result).toEqual({ statusCode: 204, headers: {}, body: "", isBase64Encoded: false });
      expect(seen).toHaveLength(1);
      expect(seen[0]?.[0]).toMatchObject({ id: "evt_01HZX3K9", type: "flag.updated" });
      expect(seen[0]?.[1]).toBe(event);
      expect(seen[0]?.[2]).toBe(context);
    },
  );

  it.each(FIXTURES)("refuses %s with one byte of the body changed", async (name) => {
    const event = fixture<LambdaProxyEvent & { body: string; isBase64Encoded: boolean }>(name);
    const text = event.isBase64Encoded ? Buffer.from(event.body, "base64").toString() : event.body;
    const tampered = text.replace("true", "fals");
    event.body = event.isBase64Encoded ? Buffer.from(tampered).toString("base64") : tampered;
    const result = await webhookHandler({ secret: compact.secret, onEvent() {} })(event, context);
    expect(result.statusCode).toBe(401);
    expect(JSON.parse(result.body).error.code).toBe("invalid_signature");
  });

  it("verifies the decoded bytes of a base64 body, not its base64 text", async () => {
    const event = fixture<LambdaProxyEventV2>("function-url");
    expect(event.isBase64Encoded).toBe(true);
    expect(event.body).not.toContain("evt_01HZX3K9");
    const result = await webhookHandler({ secret: compact.secret, onEvent() {} })(event, context);
    expect(result.statusCode).toBe(204);
  });
});

describe("Lambda headers", () => {
  const lambda = webhookHandler({ secret: compact.secret, onEvent() {} });
  const base = () => fixture<LambdaProxyEventV1>("rest-api-v1");
  const code = (result: LambdaProxyResult) => (result.body ? JSON.parse(result.body).error?.code : undefined);

  it("finds the signature in headers alone when multiValueHeaders is null", async () => {
    const result = await lambda({ ...base(), multiValueHeaders: null }, context);
    expect(result.statusCode).toBe(204);
  });

  it("finds the signature under any spelling of its name", async () => {
    const event = base();
    event.headers = { "sErViCe-SiGnAtUrE": compact.signature };
    event.multiValueHeaders = { "sErViCe-SiGnAtUrE": [compact.signature] };
    expect((await lambda(event, context)).statusCode).toBe(204);
  });

  it("refuses a signature repeated in multiValueHeaders though headers holds one right copy", async () => {
    const event = base();
    event.multiValueHeaders = { "Service-Signature": [compact.signature, compact.signature] };
    const result = await lambda(event, context);
    expect(result.statusCode).toBe(401);
    expect(code(result)).toBe("invalid_signature");
  });

  it("refuses a signature present under two spellings of its name", async () => {
    const event = base();
    event.multiValueHeaders = null;
    event.headers = { "Service-Signature": compact.signature, "service-signature": compact.signature };
    expect(code(await lambda(event, context))).toBe("invalid_signature");
  });

  it("refuses a v2 signature header whose repeats API Gateway joined with a comma", async () => {
    const event = fixture<LambdaProxyEventV2>("http-api-v2");
    event.headers = { ...event.headers, "service-signature": `${compact.signature},${compact.signature}` };
    expect(code(await lambda(event, context))).toBe("invalid_signature");
  });

  it("answers missing_signature when the event has no headers at all", async () => {
    const event = base();
    event.headers = null;
    event.multiValueHeaders = null;
    expect(code(await lambda(event, context))).toBe("missing_signature");
  });
});

describe("Lambda bodies and events", () => {
  const lambda = webhookHandler({ secret: compact.secret, limit: compact.body.length, onEvent() {} });

  it("counts the limit on decoded bytes: a base64 body of exactly the limit passes", async () => {
    const event = fixture<LambdaProxyEventV2>("function-url");
    expect(event.body?.length).toBeGreaterThan(compact.body.length);
    expect((await lambda(event, context)).statusCode).toBe(204);
    const over = Buffer.concat([compact.body, Buffer.from(" ")]);
    event.body = over.toString("base64");
    const result = await lambda(event, context);
    expect(result.statusCode).toBe(413);
    expect(JSON.parse(result.body).error.code).toBe("payload_too_large");
  });

  it("refuses a forged body marked base64 that is not with 401: the signature check comes first", async () => {
    const event = { ...fixture<LambdaProxyEventV2>("http-api-v2"), isBase64Encoded: true, body: "not*base64" };
    const result = await lambda(event, context);
    expect(result.statusCode).toBe(401);
    expect(JSON.parse(result.body).error).toEqual({
      code: "invalid_signature",
      message: "the body is marked isBase64Encoded but is not base64, so service-signature cannot be its HMAC-SHA256",
    });
    // Without a signature at all, the answer is missing_signature, as for any other body.
    const unsigned = { ...event, headers: {} };
    expect(JSON.parse((await lambda(unsigned, context)).body).error.code).toBe("missing_signature");
  });

  it("a string body (Lambda's) is measured and verified as UTF-8 bytes", async () => {
    // 40 characters of "é" are 80 bytes: over a limit of 60 although the string has 40 units.
    const text = "é".repeat(40);
    const headers = { "service-signature": await signatureOf(compact.secret, text) };
    const invoke = (limit: number) =>
      webhookHandler({ secret: compact.secret, limit, onEvent: () => {} })(
        { httpMethod: "POST", headers, body: text } as never,
        context,
      );
    const over = await invoke(60);
    expect([over.statusCode, JSON.parse(over.body ?? "")]).toEqual([
      413,
      { error: { code: "payload_too_large", message: "body is larger than the limit of 60 bytes" } },
    ]);
    // Within the limit, the signature over the UTF-8 bytes matches: refused only as no JSON.
    const within = await invoke(80);
    expect([within.statusCode, JSON.parse(within.body ?? "").error.code]).toEqual([400, "invalid_payload"]);
  });

  it("answers 405, never throws, for events that are not HTTP requests", async () => {
    for (const event of [null, undefined, 42, {}, { Records: [] }, { requestContext: {} }]) {
      const result = await lambda(event as never, context);
      expect(result.statusCode).toBe(405);
      expect(JSON.parse(result.body).error.code).toBe("method_not_allowed");
    }
  });

  it("says what a non-HTTP invocation is in its 405, instead of 'method undefined'", async () => {
    const sqs = { Records: [{ messageId: "1", body: "{}", eventSource: "aws:sqs" }] };
    const answer = await lambda(sqs as never, context);
    expect(answer.statusCode).toBe(405);
    const { message } = JSON.parse(answer.body).error;
    expect(message).toMatch(/^this invocation is not an HTTP request: it is a batch of Records \(as SQS/);
    expect(message).toContain("API Gateway (REST or HTTP API) or a function URL");
    expect(message).not.toContain("undefined");
    const scheduled = { source: "aws.events", "detail-type": "Scheduled Event" };
    expect(JSON.parse((await lambda(scheduled as never, context)).body).error.message).toContain(
      'an event with the fields "source", "detail-type"',
    );
    expect(JSON.parse((await lambda(null as never, context)).body).error.message).toContain("a null event");
  });

  it("reads the method of a v1 event from httpMethod and of a v2 event from requestContext.http.method", async () => {
    const v1 = { ...fixture<LambdaProxyEventV1>("rest-api-v1"), httpMethod: "PUT" };
    expect(JSON.parse((await lambda(v1, context)).body).error.message).toBe(
      "method PUT not allowed: deliveries are POST",
    );
    const v2 = fixture<LambdaProxyEventV2>("http-api-v2");
    v2.requestContext.http.method = "DELETE";
    expect(JSON.parse((await lambda(v2, context)).body).error.message).toBe(
      "method DELETE not allowed: deliveries are POST",
    );
  });
});

describe("Lambda onEvent answers and dedupe", () => {
  const event = () => fixture<LambdaProxyEventV1>("rest-api-v1");

  it("returns a proxy result that onEvent built as it is", async () => {
    const own = {
      statusCode: 202,
      multiValueHeaders: { "x-queued": ["1", "2"] },
      body: "queued",
      isBase64Encoded: false,
    };
    const lambda = webhookHandler({ secret: compact.secret, onEvent: () => own });
    expect(await lambda(event(), context)).toBe(own);
  });

  it("turns a { status } reply into a proxy result", async () => {
    const lambda = webhookHandler({
      secret: compact.secret,
      onEvent: () => ({ status: 202, headers: { "x-job": "7" }, body: { queued: true } }),
    });
    expect(await lambda(event(), context)).toEqual({
      statusCode: 202,
      headers: { "x-job": "7", "content-type": "application/json; charset=utf-8" },
      body: '{"queued":true}',
      isBase64Encoded: false,
    });
  });

  it("answers 500 handler_error without the thrown message, releases the claim, and runs the retry", async () => {
    let calls = 0;
    const errors: unknown[] = [];
    const lambda = webhookHandler({
      secret: compact.secret,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onError: (error) => void errors.push(error),
      onEvent() {
        calls++;
        if (calls === 1) throw new Error("database password is hunter2");
      },
    });
    const failed = await lambda(event(), context);
    expect(failed.statusCode).toBe(500);
    expect(JSON.parse(failed.body).error.code).toBe("handler_error");
    expect(failed.body).not.toContain("hunter2");
    expect(errors).toHaveLength(1);
    expect((await lambda(event(), context)).statusCode).toBe(204);
    const duplicate = await lambda(event(), context);
    expect(duplicate.statusCode).toBe(204);
    expect(duplicate.headers?.["webhook-duplicate"]).toBe("true");
    expect(calls).toBe(2);
  });

  it("checks its options when it is created", () => {
    expect(() => webhookHandler({ secret: compact.secret } as never)).toThrow(
      'flag-webhooks: option "onEvent" must be a function',
    );
    expect(() => webhookHandler({ secret: "", onEvent() {} })).toThrow(TypeError);
  });
});

// Events built here as API Gateway and function URLs hand them over, each with a new delivery.
const SECRET = "lambda-secret";
const sign = (text: string) => signatureOf(SECRET, text);
const body = () => JSON.stringify(createEvent("flag.deleted", { data: { flag: "f" } }));

function v1(
  text: string | null | undefined,
  headers: LambdaProxyEventV1["headers"],
  multi?: LambdaProxyEventV1["multiValueHeaders"],
) {
  return { httpMethod: "POST", headers, multiValueHeaders: multi, body: text, isBase64Encoded: false };
}

const errorOf = (result: { body: string }) => JSON.parse(result.body).error;

describe("where the Lambda handler finds the signature", () => {
  const lambda = webhookHandler({ secret: SECRET, onEvent() {} });

  it("looks in headers when multiValueHeaders holds other headers but not the signature", async () => {
    const text = body();
    const result = await lambda(
      v1(text, { "Service-Signature": await sign(text) }, { "Content-Type": ["application/json"] }),
      context,
    );
    expect(result.statusCode).toBe(204);
  });

  it("skips a signature header without a value, in either map, instead of verifying the text 'undefined'", async () => {
    const text = body();
    const fromHeaders = await lambda(
      v1(text, { "service-signature": await sign(text) }, { "service-signature": undefined }),
      context,
    );
    expect(fromHeaders.statusCode).toBe(204);
    const none = await lambda(v1(text, { "Service-Signature": undefined }, null), context);
    expect([none.statusCode, errorOf(none).code]).toEqual([401, "missing_signature"]);
  });
});

describe("Lambda bodies", () => {
  const lambda = webhookHandler({ secret: SECRET, onEvent() {} });

  it.each([null, undefined])(
    "reads a body of %s as no bytes: a signature of the empty body passes, then the empty body is no event",
    async (none) => {
      const result = await lambda(v1(none, { "service-signature": await sign("") }), context);
      expect([result.statusCode, errorOf(result).code]).toEqual([400, "invalid_payload"]);
      const forged = await lambda(v1(none, { "service-signature": await sign("{}") }), context);
      expect([forged.statusCode, errorOf(forged).code]).toEqual([401, "invalid_signature"]);
    },
  );

  it("decodes a base64 body byte for byte, a multi-byte UTF-8 text included", async () => {
    const text = body().replace('"f"', '"fé✓"');
    const event = {
      ...v1(Buffer.from(text).toString("base64"), { "service-signature": await sign(text) }),
      isBase64Encoded: true,
    };
    let flag: unknown;
    const seeing = webhookHandler({
      secret: SECRET,
      onEvent: (e) => {
        flag = (e.data as { flag: string }).flag;
      },
    });
    expect((await seeing(event, context)).statusCode).toBe(204);
    expect(flag).toBe("fé✓");
  });
});

describe("what a non-HTTP invocation is called in the 405", () => {
  const lambda = webhookHandler({ secret: SECRET, onEvent() {} });
  const message = async (event: unknown) => errorOf(await lambda(event as never, context)).message as string;

  it("names at most five fields, each at most 40 characters", async () => {
    const long = "k".repeat(50);
    const text = await message({ a: 1, b: 2, c: 3, d: 4, [long]: 5, f: 6, g: 7 });
    expect(text).toContain(`an event with the fields "a", "b", "c", "d", "${"k".repeat(40)}".`);
    expect(text).not.toContain('"f"');
  });

  it("names the type of an event that has no fields", async () => {
    expect(await message(42)).toContain("it is a number event.");
    expect(await message("ping")).toContain("it is a string event.");
    expect(await message({})).toContain("it is a object event.");
    expect(await message(null)).toContain("it is a null event.");
  });
});

describe("proxy results onEvent builds itself", () => {
  const event = async () => {
    const text = body();
    return v1(text, { "service-signature": await sign(text) });
  };

  it("sends a result whose statusCode is a three-digit string as it is, and it counts as handled", async () => {
    let calls = 0;
    const own = { statusCode: "202", body: "queued" };
    const lambda = webhookHandler({
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent: () => {
        calls++;
        return own;
      },
    });
    const delivery = await event();
    expect(await lambda(delivery, context)).toBe(own);
    const again = await lambda(delivery, context);
    expect([again.statusCode, again.headers?.["webhook-duplicate"], calls]).toEqual([204, "true", 1]);
  });

  it("sends a result whose statusCode is a three-digit string that is not 2xx as it is, and releases the claim", async () => {
    // AWS's own blueprints build `statusCode: err ? "400" : "200"`: string status codes are common.
    let runs = 0;
    const lambda = webhookHandler({
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onEvent: () => (++runs === 1 ? { statusCode: "503", body: "busy" } : undefined),
    });
    const delivery = await event();
    expect(await lambda(delivery, context)).toEqual({ statusCode: "503", body: "busy" });
    const retry = await lambda(delivery, context);
    expect([retry.statusCode, retry.headers?.["webhook-duplicate"], runs]).toEqual([204, undefined, 2]);
  });

  it.each([
    ["a statusCode string that is not three digits", { statusCode: "2020", body: "x" }],
    ["a statusCode string of letters", { statusCode: "abc", body: "x" }],
    ["a statusCode that is a number in a longer string", { statusCode: "x202", body: "x" }],
    ["a body that is not a string", { statusCode: 200, body: { ok: true } }],
    ["a fractional statusCode", { statusCode: 200.5 }],
    ["a statusCode below 100", { statusCode: 99, body: "" }],
    // Number() reads these as 202, but API Gateway reads only three digits.
    ["a statusCode string with a leading space", { statusCode: " 202", body: "x" }],
    ["a statusCode string with a trailing space", { statusCode: "202 ", body: "x" }],
    ["a statusCode string in hexadecimal", { statusCode: "0xCA", body: "x" }],
  ])("answers 500 handler_error for %s, and the retry runs the handler again", async (_, result) => {
    let calls = 0;
    const errors: unknown[] = [];
    const lambda = webhookHandler({
      secret: SECRET,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1h" },
      onError: (error) => void errors.push(error),
      onEvent: () => {
        calls++;
        return result;
      },
    });
    const delivery = await event();
    const first = await lambda(delivery, context);
    expect([first.statusCode, errorOf(first).code]).toEqual([500, "handler_error"]);
    expect(errors).toEqual([
      new TypeError("flag-webhooks: onEvent returned a result with no valid HTTP status to answer with"),
    ]);
    await lambda(delivery, context);
    expect(calls).toBe(2);
  });

  it("takes a result with a null or absent body as it is", async () => {
    for (const own of [{ statusCode: 200, body: null }, { statusCode: 201 }]) {
      const lambda = webhookHandler({ secret: SECRET, onEvent: () => own });
      expect(await lambda(await event(), context)).toBe(own);
    }
  });

  it("answers 204 for null, and for an object of a class that has a statusCode (not a proxy result)", async () => {
    class Job {
      statusCode = 500;
      body = "not a result";
    }
    for (const value of [null, new Job()]) {
      const lambda = webhookHandler({ secret: SECRET, onEvent: () => value });
      expect(await lambda(await event(), context)).toEqual({
        statusCode: 204,
        headers: {},
        body: "",
        isBase64Encoded: false,
      });
    }
  });
});
