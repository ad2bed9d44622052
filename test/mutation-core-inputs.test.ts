import { createHmac } from "node:crypto";
import { parseEvent, SIGNATURE_HEADER, sign, verifyEvent, verifySignature, WebhookError } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it, vi } from "vitest";
import { backends } from "./support/backends.js";
import { vector } from "./support/vectors.js";

// Behaviour the mutation run (issue 20, part 4) showed no test pinned down: what a programming
// error's message tells the user, the replay window of verifyEvent, bodies that arrive in pieces,
// and `instanceof` across two copies of the package.

const compact = vector("flag-updated-compact");
const { secret } = compact;
const signature = (body: string | Uint8Array) => createHmac("sha256", secret).update(body).digest("hex");

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
    const { message } = await typeError(() => sign({ secret, payload: { id: "evt_1" } as never }));
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
  });

  it("explains, for no body at all, how to keep the raw body in NestJS and Express", async () => {
    const { message } = await typeError(() => verifySignature({ secret, payload: undefined as never, signature: "" }));
    expect(message).toContain(
      "got undefined. No raw body was kept: in NestJS, create the app with NestFactory.create(AppModule, { rawBody: true }) " +
        'and pass req.rawBody; in Express, use express.raw({ type: "*/*" }) or express.json({ verify: keepRawBody }) from flag-webhooks/express.',
    );
    expect(message).not.toContain("A body parser already turned the body into an object");
  });
});

describe("verifyEvent's replay window", () => {
  const { body } = compact;
  const sent = Date.parse(JSON.parse(body.toString("utf8")).createdAt);
  const sig = compact.signature;

  it("is off without maxAge: an event a year old, or dated an hour ahead, is returned", async () => {
    for (const now of [sent + 365 * 86_400_000, sent - 3_600_000]) {
      const event = await verifyEvent({ secret, payload: body, signature: sig, now: () => now });
      expect(event.id).toBe(JSON.parse(body.toString("utf8")).id);
    }
  });

  it("without maxAge, never reads the clock", async () => {
    const now = vi.fn(() => Number.NaN);
    await verifyEvent({ secret, payload: body, signature: sig, now });
    expect(now).not.toHaveBeenCalled();
  });

  it("with maxAge, refuses an event older than the window (401 event_expired) and passes one inside it", async () => {
    await expect(
      verifyEvent({ secret, payload: body, signature: sig, maxAge: "5m", now: () => sent + 299_000 }),
    ).resolves.toMatchObject({ createdAt: JSON.parse(body.toString("utf8")).createdAt });
    const refused = verifyEvent({ secret, payload: body, signature: sig, maxAge: "5m", now: () => sent + 301_000 });
    await expect(refused).rejects.toMatchObject({
      code: "event_expired",
      status: 401,
      message: "event is older than the replay window of 300000 ms",
    });
  });

  it("names the maxAge option when its value is not a duration, before looking at the delivery", async () => {
    const { message } = await typeError(() =>
      verifyEvent({ secret, payload: body, signature: "not-even-hex", maxAge: "soon" }),
    );
    expect(message).toBe(
      'flag-webhooks: option "maxAge" must be a positive number of milliseconds or a duration such as "5m", got "soon"',
    );
  });

  it("says why a wrong signature is refused, naming the header", async () => {
    const refused = verifyEvent({ secret, payload: body, signature: "0".repeat(64) });
    await expect(refused).rejects.toMatchObject({
      code: "invalid_signature",
      message: `${SIGNATURE_HEADER} header is not the HMAC-SHA256 of the body`,
    });
  });
});

describe("a body that arrives in several pieces (fetch, streamed)", () => {
  /** A Request whose body the stream yields in `pieces` chunks, as a network read does. */
  function streamed(body: Uint8Array, pieces: number, headers: Record<string, string>): Request {
    const size = Math.ceil(body.byteLength / pieces);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < body.byteLength; at += size) controller.enqueue(body.slice(at, at + size));
        controller.close();
      },
    });
    return new Request("http://localhost/webhooks", { method: "POST", body: stream, headers, duplex: "half" } as never);
  }

  it.each([1, 2, 3, 7])("is put back together in order from %i chunk(s): verified, and the event parsed", async (n) => {
    const body = new Uint8Array(compact.body);
    const seen: string[] = [];
    const handler = webhookHandler({ secret, onEvent: (event) => void seen.push(event.id) });
    const response = await handler(streamed(body, n, { [SIGNATURE_HEADER]: signature(body) }));
    expect(response.status).toBe(204);
    expect(seen).toEqual([JSON.parse(compact.body.toString("utf8")).id]);
  });

  it("refuses a body whose chunks, together, are not what was signed", async () => {
    const body = new Uint8Array(compact.body);
    const handler = webhookHandler({ secret, onEvent: () => {} });
    const response = await handler(streamed(body, 3, { [SIGNATURE_HEADER]: signature(body.slice(0, 40)) }));
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { code: "invalid_signature" } });
  });

  it("verifies an empty body as zero bytes", async () => {
    const handler = webhookHandler({ secret, onEvent: () => {} });
    const empty = new Request("http://localhost/webhooks", {
      method: "POST",
      body: new ReadableStream({ start: (controller) => controller.close() }),
      headers: { [SIGNATURE_HEADER]: signature("") },
      duplex: "half",
    } as never);
    const response = await handler(empty);
    // The signature of zero bytes matches: the body is then refused as no JSON, not as forged.
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: { code: "invalid_payload", message: "body is not valid JSON" } });
  });
});

describe("WebhookError across two copies of the package", () => {
  it("is instanceof in either copy, as a CommonJS and an ES module copy loaded together must be", async () => {
    const one = await (backends[0] as (typeof backends)[0]).load();
    const two = await (backends[1] as (typeof backends)[0]).load();
    expect(one.WebhookError).not.toBe(two.WebhookError);
    expect(new one.WebhookError("invalid_signature", "no") instanceof two.WebhookError).toBe(true);
    expect(new two.WebhookError("invalid_signature", "no") instanceof one.WebhookError).toBe(true);
    expect(new Error("no") instanceof two.WebhookError).toBe(false);
  });

  it("names a top-level field that is not a string without any prefix", () => {
    const body = JSON.stringify({ ...JSON.parse(compact.body.toString("utf8")), createdAt: 5 });
    const error = (() => {
      try {
        parseEvent(body);
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(error).toBeInstanceOf(WebhookError);
    expect((error as WebhookError).message).toBe("createdAt must be a string");
  });
});

describe("the body limit", () => {
  it.each([-1, -1024, 1.5, Number.NaN])("refuses the number %s when the handler is made, naming it", (limit) => {
    expect(() => webhookHandler({ secret, limit, onEvent: () => {} })).toThrow(
      new TypeError(
        `flag-webhooks: option "limit" must be a non-negative whole number of bytes or a size such as "512kb", got ${JSON.stringify(limit)}`,
      ),
    );
  });

  it("takes 0: only an empty body passes", async () => {
    const handler = webhookHandler({ secret, limit: 0, onEvent: () => {} });
    const post = (text: string) =>
      handler(
        new Request("http://localhost/webhooks", {
          method: "POST",
          body: text,
          headers: { [SIGNATURE_HEADER]: signature(text) },
        }),
      );
    expect((await post("{")).status).toBe(413);
    expect((await post("")).status).toBe(400); // authentic, within the limit, and not an event
  });
});
