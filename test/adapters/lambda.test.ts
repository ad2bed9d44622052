import { createHmac } from "node:crypto";
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
import { describe, expect, it } from "vitest";
import { buildCases, type DeliveryCase, LIMIT, SECRET, SECRETS } from "../support/cases.js";
import { vector } from "../support/vectors.js";

// The Lambda handler fed the events AWS documents (test/fixtures/lambda/, see its README), and the
// shared case table converted into REST API (v1) and HTTP API / function URL (v2) events, with
// the body as text and as base64.

const fixtures = join(import.meta.dirname, "../fixtures/lambda");
const fixture = <T>(name: string): T => JSON.parse(readFileSync(join(fixtures, `${name}.json`), "utf8")) as T;
const FIXTURES = ["rest-api-v1", "http-api-v1", "http-api-v2", "function-url"] as const;

const compact = vector("flag-updated-compact");
const cases = buildCases((body) => createHmac("sha256", SECRET).update(body).digest("hex"));
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
    expect(result.body).not.toContain(SECRET);
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

  it("refuses a forged body marked base64 that is not with 401: the signature check comes first (issue 15)", async () => {
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

  it("answers 405, never throws, for events that are not HTTP requests", async () => {
    for (const event of [null, undefined, 42, {}, { Records: [] }, { requestContext: {} }]) {
      const result = await lambda(event as never, context);
      expect(result.statusCode).toBe(405);
      expect(JSON.parse(result.body).error.code).toBe("method_not_allowed");
    }
  });

  it("says what a non-HTTP invocation is, instead of 'method undefined' (issue 15)", async () => {
    const sqs = { Records: [{ messageId: "1", body: "{}", eventSource: "aws:sqs" }] };
    const { message } = JSON.parse((await lambda(sqs as never, context)).body).error;
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
