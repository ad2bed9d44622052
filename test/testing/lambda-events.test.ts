import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MemoryDedupeStore, sign } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/lambda";
import { createEvent, lambdaContext, signedLambdaEvent } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";

// signedLambdaEvent and lambdaContext drive the real Lambda adapter, as a user's test would: the
// events are the ones AWS documents (test/fixtures/lambda/), signed, and the handler answers them.

const secret = "test-secret";
const fixture = (name: string) =>
  JSON.parse(readFileSync(join(import.meta.dirname, "../fixtures/lambda", `${name}.json`), "utf8"));

/** Every key path of an object, `a.b.c`, for comparing an event's shape with AWS's samples. */
function keyPaths(value: unknown, prefix = ""): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [];
  return Object.entries(value).flatMap(([key, inner]) => {
    const path = prefix + key;
    // Header names are the request's, not the event format's.
    if (key === "headers" || key === "multiValueHeaders") return [path];
    return [path, ...keyPaths(inner, `${path}.`)];
  });
}

describe("signedLambdaEvent", () => {
  it.each([
    ["v2", "http-api-v2"],
    ["v1", "rest-api-v1"],
  ] as const)("makes a %s event with every field of AWS's sample (%s)", async (version, sample) => {
    const event = await signedLambdaEvent({ secret, event: createEvent("flag.updated"), version });
    const missing = keyPaths(fixture(sample)).filter((path) => !keyPaths(event).includes(path));
    expect(missing).toEqual([]);
  });

  it("is answered 204 by the Lambda handler, as an HTTP API 2.0 event by default and as a REST API event", async () => {
    const seen: string[] = [];
    const handler = webhookHandler({
      secret,
      onEvent: (event, lambdaEvent) => {
        seen.push(`${event.type} ${"rawPath" in lambdaEvent ? "v2" : "v1"}`);
      },
    });
    const v2 = await handler(await signedLambdaEvent({ secret, event: createEvent("flag.updated") }), lambdaContext());
    const v1 = await handler(
      await signedLambdaEvent({ secret, event: createEvent("flag.deleted"), version: "v1" }),
      lambdaContext(),
    );
    expect([v2.statusCode, v1.statusCode]).toEqual([204, 204]);
    expect(seen).toEqual(["flag.updated v2", "flag.deleted v1"]);
  });

  it("signs the body the handler verifies: a wrong secret is 401, a changed body is 401", async () => {
    const handler = webhookHandler({ secret, onEvent: () => {} });
    const event = createEvent("rollout.step");
    const forged = await handler(await signedLambdaEvent({ secret: "wrong", event }), lambdaContext());
    expect([forged.statusCode, JSON.parse(forged.body).error.code]).toEqual([401, "invalid_signature"]);
    const tampered = await signedLambdaEvent({ secret, event, version: "v1" });
    tampered.body = tampered.body.replace("production", "staging");
    const answer = await handler(tampered, lambdaContext());
    expect([answer.statusCode, JSON.parse(answer.body).error.code]).toEqual([401, "invalid_signature"]);
  });

  it("passes a body exactly: text as it is, bytes that are not UTF-8 as base64", async () => {
    const text = '{ "pretty": true }\n';
    const asText = await signedLambdaEvent({ secret, body: text });
    expect([asText.body, asText.isBase64Encoded]).toEqual([text, false]);
    expect(asText.headers["service-signature"]).toBe(await sign({ secret, payload: text }));
    const bytes = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]);
    const asBase64 = await signedLambdaEvent({ secret, body: bytes, version: "v1" });
    expect([asBase64.body, asBase64.isBase64Encoded]).toEqual([Buffer.from(bytes).toString("base64"), true]);
    expect(asBase64.multiValueHeaders["Service-Signature"]).toEqual([await sign({ secret, payload: bytes })]);
    // The adapter decodes it and verifies the same bytes: the signature holds, the JSON does not.
    const answer = await webhookHandler({ secret, onEvent: () => {} })(asBase64, lambdaContext());
    expect([answer.statusCode, JSON.parse(answer.body).error.code]).toEqual([400, "invalid_payload"]);
  });

  it("is a duplicate the second time it is sent, with dedupe on", async () => {
    let runs = 0;
    const handler = webhookHandler({
      secret,
      dedupe: { store: new MemoryDedupeStore(), ttl: "1m" },
      onEvent: () => {
        runs++;
      },
    });
    const lambdaEvent = await signedLambdaEvent({ secret, event: createEvent("flag.created") });
    const first = await handler(lambdaEvent, lambdaContext());
    const second = await handler(lambdaEvent, lambdaContext());
    expect([first.statusCode, second.statusCode, second.headers?.["webhook-duplicate"], runs]).toEqual([
      204,
      204,
      "true",
      1,
    ]);
  });

  it("routes by path and method: the path option, POST in both formats", async () => {
    const v2 = await signedLambdaEvent({ secret, body: "{}", path: "/hooks/flags" });
    expect([v2.rawPath, v2.routeKey, v2.requestContext.http.method]).toEqual([
      "/hooks/flags",
      "POST /hooks/flags",
      "POST",
    ]);
    const v1 = await signedLambdaEvent({ secret, body: "{}", path: "/hooks/flags", version: "v1" });
    expect([v1.path, v1.resource, v1.httpMethod]).toEqual(["/hooks/flags", "/hooks/flags", "POST"]);
    expect(v1.requestContext.requestTime).toMatch(/^\d\d\/[A-Z][a-z]{2}\/\d{4}:\d\d:\d\d:\d\d \+0000$/);
  });

  it("refuses options it cannot make an event of", async () => {
    await expect(signedLambdaEvent({ secret, body: "{}", version: "v3" as "v1" })).rejects.toThrow(/"version"/);
    await expect(signedLambdaEvent({ secret, body: "{}", path: "webhooks" })).rejects.toThrow(/"path"/);
    await expect(signedLambdaEvent({ secret } as never)).rejects.toThrow(/exactly one of "event" and "body"/);
  });
});

describe("lambdaContext", () => {
  it("reaches onEvent, with a fresh request id each time and the time left counting down", async () => {
    const contexts: { id: string; left: number; name: string }[] = [];
    const handler = webhookHandler({
      secret,
      onEvent: (_event, _lambdaEvent, context) => {
        contexts.push({ id: context.awsRequestId, left: context.getRemainingTimeInMillis(), name: "" });
      },
    });
    const lambdaEvent = await signedLambdaEvent({ secret, event: createEvent("flag.updated") });
    await handler(lambdaEvent, lambdaContext({ timeoutMs: 10_000 }));
    await handler(lambdaEvent, lambdaContext());
    expect(contexts[0]?.id).not.toBe(contexts[1]?.id);
    expect(contexts[0]?.left).toBeGreaterThan(9_000);
    expect(contexts[0]?.left).toBeLessThanOrEqual(10_000);
    expect(contexts[1]?.left).toBeLessThanOrEqual(3_000);
  });

  it("names the function, and refuses the callback-era completion calls", () => {
    const context = lambdaContext({ functionName: "flags", timeoutMs: 0 });
    expect([context.functionName, context.logGroupName, context.getRemainingTimeInMillis()]).toEqual([
      "flags",
      "/aws/lambda/flags",
      0,
    ]);
    expect(context.invokedFunctionArn).toMatch(/:function:flags$/);
    expect(() => context.succeed("ok")).toThrow(/return from the handler instead/);
    expect(() => context.fail("no")).toThrow(/context\.fail\(\)/);
    expect(() => context.done()).toThrow(/context\.done\(\)/);
    expect(() => lambdaContext({ timeoutMs: -1 })).toThrow(/"timeoutMs"/);
  });
});
