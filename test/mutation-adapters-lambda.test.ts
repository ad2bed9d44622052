import { createHmac } from "node:crypto";
import { MemoryDedupeStore } from "flag-webhooks";
import { type LambdaContext, type LambdaProxyEventV1, webhookHandler } from "flag-webhooks/lambda";
import { describe, expect, it } from "vitest";

// The Lambda handler's edges, as API Gateway and function URLs hand them over: where the signature
// is found, bodies that are absent, results onEvent builds itself, and what a non-HTTP event is
// called in the 405's message.
const SECRET = "mutation-lambda-secret";
const context: LambdaContext = { awsRequestId: "req-1", getRemainingTimeInMillis: () => 3000 };
const sign = (body: string) => createHmac("sha256", SECRET).update(body).digest("hex");

let n = 0;
function body(): string {
  return JSON.stringify({
    id: `evt_lambda_${n++}`,
    type: "flag.deleted",
    createdAt: new Date().toISOString(),
    environment: "production",
    data: { flag: "f" },
  });
}

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
      v1(text, { "Service-Signature": sign(text) }, { "Content-Type": ["application/json"] }),
      context,
    );
    expect(result.statusCode).toBe(204);
  });

  it("skips a signature header without a value, in either map, instead of verifying the text 'undefined'", async () => {
    const text = body();
    const fromHeaders = await lambda(
      v1(text, { "service-signature": sign(text) }, { "service-signature": undefined }),
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
      const result = await lambda(v1(none, { "service-signature": sign("") }), context);
      expect([result.statusCode, errorOf(result).code]).toEqual([400, "invalid_payload"]);
      const forged = await lambda(v1(none, { "service-signature": sign("{}") }), context);
      expect([forged.statusCode, errorOf(forged).code]).toEqual([401, "invalid_signature"]);
    },
  );

  it("decodes a base64 body byte for byte, a multi-byte UTF-8 text included", async () => {
    const text = body().replace('"f"', '"fé✓"');
    const event = {
      ...v1(Buffer.from(text).toString("base64"), { "service-signature": sign(text) }),
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
  const event = () => {
    const text = body();
    return v1(text, { "service-signature": sign(text) });
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
    const delivery = event();
    expect(await lambda(delivery, context)).toBe(own);
    const again = await lambda(delivery, context);
    expect([again.statusCode, again.headers?.["webhook-duplicate"], calls]).toEqual([204, "true", 1]);
  });

  it.each([
    ["a statusCode string that is not three digits", { statusCode: "2020", body: "x" }],
    ["a statusCode string of letters", { statusCode: "abc", body: "x" }],
    ["a statusCode that is a number in a longer string", { statusCode: "x202", body: "x" }],
    ["a body that is not a string", { statusCode: 200, body: { ok: true } }],
    ["a fractional statusCode", { statusCode: 200.5 }],
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
    const delivery = event();
    const first = await lambda(delivery, context);
    expect([first.statusCode, errorOf(first).code]).toEqual([500, "handler_error"]);
    expect(String(errors[0])).toMatch(/no valid HTTP status/);
    await lambda(delivery, context);
    expect(calls).toBe(2);
  });

  it("takes a result with a null or absent body as it is", async () => {
    for (const own of [{ statusCode: 200, body: null }, { statusCode: 201 }]) {
      const lambda = webhookHandler({ secret: SECRET, onEvent: () => own });
      expect(await lambda(event(), context)).toBe(own);
    }
  });

  it("answers 204 for null, and for an object of a class that has a statusCode (not a proxy result)", async () => {
    class Job {
      statusCode = 500;
      body = "not a result";
    }
    for (const value of [null, new Job()]) {
      const lambda = webhookHandler({ secret: SECRET, onEvent: () => value });
      expect(await lambda(event(), context)).toEqual({
        statusCode: 204,
        headers: {},
        body: "",
        isBase64Encoded: false,
      });
    }
  });
});
