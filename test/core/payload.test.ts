import { parseEvent, sign, verifyEvent, verifySignature } from "flag-webhooks";
import { describe, expect, it } from "vitest";
import { vector } from "../support/vectors.js";

// A payload must be the raw body, bytes or a string: what a programming error's message tells
// the user who passed something else, whichever of the core's calls they made.

const compact = vector("flag-updated-compact");
const { secret } = compact;

/** The TypeError a call throws synchronously or rejects with. */
async function typeError(call: () => unknown): Promise<TypeError> {
  try {
    await call();
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    return error as TypeError;
  }
  throw new Error("the call did not throw");
}

describe("a payload that is not raw bytes", () => {
  it.each([
    ["null", null],
    ["an array", [1, 2]],
    ["a parsed object", { id: "evt_1" }],
    ["number", 42],
    ["boolean", true],
    ["undefined", undefined],
  ])("is named in the message as %s, by sign, verifySignature and parseEvent", async (name, payload) => {
    const calls = [
      () => sign({ secret, payload: payload as never }),
      () => verifySignature({ secret, payload: payload as never, signature: compact.signature }),
      () => parseEvent(payload as never),
    ];
    for (const call of calls) {
      const { message } = await typeError(call);
      expect(message).toContain(
        `flag-webhooks: option "payload" must be the raw body as a string or bytes, got ${name}. `,
      );
    }
  });

  it("explains, for a parsed body, that re-serialising cannot work and how to keep the raw bytes in each framework", async () => {
    for (const call of [
      () => sign({ secret, payload: { id: "evt_1" } as never }),
      () => verifyEvent({ secret, payload: { a: 1 } as never, signature: "x" }),
    ]) {
      const { message } = await typeError(call);
      for (const advice of [
        "A body parser already turned the body into an object, and a signature over the bytes on the wire cannot be checked against a re-serialised object.",
        'Pass the raw bytes instead: in Express, use flag-webhooks/express or express.raw({ type: "*/*" }) on the webhook route',
        "(or keep req.rawBody with express.json({ verify: keepRawBody })); in Koa, mount flag-webhooks/koa before the body parser;",
        "in fetch handlers (Next.js, Hono, Workers), await request.text() or request.arrayBuffer() instead of request.json();",
        "in NestJS, pass req.rawBody with NestFactory.create(AppModule, { rawBody: true }); in Fastify, register flag-webhooks/fastify.",
      ]) {
        expect(message).toContain(advice);
      }
      expect(message).not.toContain("No raw body was kept");
    }
  });

  it("explains, for no body at all, how to keep the raw body in NestJS and Express", async () => {
    for (const call of [
      () => verifySignature({ secret, payload: undefined as never, signature: "" }),
      () => verifyEvent({ secret, payload: undefined as never, signature: "x" }),
    ]) {
      const { message } = await typeError(call);
      expect(message).toContain(
        "got undefined. No raw body was kept: in NestJS, create the app with NestFactory.create(AppModule, { rawBody: true }) " +
          'and pass req.rawBody; in Express, use express.raw({ type: "*/*" }) or express.json({ verify: keepRawBody }) from flag-webhooks/express.',
      );
      expect(message).not.toContain("A body parser already turned the body into an object");
    }
  });
});
