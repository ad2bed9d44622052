import { SIGNATURE_HEADER, WebhookError } from "flag-webhooks";
import { verifyRequest, webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it, vi } from "vitest";
import { signatureOf } from "../support/deliveries.js";
import { vector } from "../support/vectors.js";

// The fetch handler and verifyRequest with real Request and Response objects: bodies read before,
// announced too large, endless or in pieces, the limit, and what onEvent's answers become. The
// shared case table: conformance.test.ts.

const compact = vector("flag-updated-compact");
const { secret, body, signature } = compact;
const post = (
  headers: Record<string, string> = { "service-signature": signature },
  payload: BodyInit = new Uint8Array(body),
) => new Request("https://example.test/webhooks", { method: "POST", headers, body: payload });

describe("webhookHandler", () => {
  it("answers 204 with no body once onEvent resolves, and hands it the request", async () => {
    const onEvent = vi.fn(async () => {});
    const request = post();
    const response = await webhookHandler({ secret, onEvent })(request);
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
    expect(onEvent).toHaveBeenCalledWith(expect.objectContaining({ type: "flag.updated" }), request);
  });

  it("answers with the Response onEvent returns", async () => {
    const response = await webhookHandler({ secret, onEvent: () => new Response("queued", { status: 202 }) })(post());
    expect([response.status, await response.text()]).toEqual([202, "queued"]);
  });

  it("answers 500 handler_error when onEvent throws, without the thrown message, and reports the error", async () => {
    const onError = vi.fn();
    const failure = new Error("db password=hunter2 refused");
    const handler = webhookHandler({
      secret,
      onEvent: () => {
        throw failure;
      },
      onError,
    });
    const response = await handler(post());
    const text = await response.text();
    expect(response.status).toBe(500);
    expect(JSON.parse(text).error.code).toBe("handler_error");
    expect(text).not.toContain("hunter2");
    expect(onError).toHaveBeenCalledWith(failure, expect.any(Request));
  });

  it("logs a failing onEvent as one line with console.error when no onError is given", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const failure = new Error("boom\nsecond line");
    const response = await webhookHandler({ secret, onEvent: () => Promise.reject(failure) })(post());
    expect(response.status).toBe(500);
    expect(log).toHaveBeenCalledTimes(1);
    const [line, ...rest] = log.mock.calls[0] ?? [];
    expect(rest).toEqual([]);
    expect(line).toBe("flag-webhooks: Error: boom second line (onEvent, a hook or the dedupe store failed)");
    log.mockRestore();
  });

  it("does not call onEvent for a refused delivery", async () => {
    const onEvent = vi.fn();
    const response = await webhookHandler({ secret, onEvent })(post({ "service-signature": "f".repeat(64) }));
    expect(response.status).toBe(401);
    expect(onEvent).not.toHaveBeenCalled();
  });

  it("explains body_already_parsed, in a fetch handler's terms, when the body was read before the handler", async () => {
    for (const read of [(r: Request) => r.text(), (r: Request) => r.arrayBuffer(), (r: Request) => r.json()]) {
      const request = post();
      await read(request);
      const response = await webhookHandler({ secret, onEvent: () => {} })(request);
      const { error } = await response.json();
      expect([response.status, error.code]).toEqual([500, "body_already_parsed"]);
      expect(error.message).toMatch(/^the request body was already parsed/);
      expect(error.message).toMatch(/c\.req\.json\(\) in Hono/);
      expect(error.message).toMatch(/request\.clone\(\)/);
      expect(error.message).not.toMatch(/express/);
    }
  });

  it("answers 413 from Content-Length alone, before reading a body", async () => {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(10));
      },
    });
    const request = new Request("https://example.test/webhooks", {
      method: "POST",
      headers: { "service-signature": signature, "content-length": "2000000" },
      body: stream,
      duplex: "half",
    } as RequestInit);
    const response = await webhookHandler({ secret, onEvent: () => {} })(request);
    expect(response.status).toBe(413);
    expect(pulled).toBeLessThanOrEqual(1); // a stream may pre-fill one chunk; none were read
  });

  it("stops reading an endless stream at the limit and cancels it", async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      pull: (controller) => controller.enqueue(new Uint8Array(4096)),
      cancel: () => {
        cancelled = true;
      },
    });
    const request = new Request("https://example.test/webhooks", {
      method: "POST",
      headers: { "service-signature": signature },
      body: stream,
      duplex: "half",
    } as RequestInit);
    const response = await webhookHandler({ secret, limit: "64kb", onEvent: () => {} })(request);
    expect(response.status).toBe(413);
    await vi.waitFor(() => expect(cancelled).toBe(true));
  });

  it("reads a POST that has no body at all as an empty body", async () => {
    const request = new Request("https://example.test/webhooks", {
      method: "POST",
      headers: { "service-signature": signature },
    });
    expect(request.body).toBeNull();
    const response = await webhookHandler({ secret, onEvent: () => {} })(request);
    expect([response.status, (await response.json()).error.code]).toEqual([401, "invalid_signature"]);
  });

  it("lets a Content-Length of exactly the limit through", async () => {
    const request = post({ "service-signature": signature, "content-length": String(body.length) });
    const response = await webhookHandler({ secret, limit: body.length, onEvent: () => {} })(request);
    expect(response.status).toBe(204);
  });

  it("answers handler_error with a fixed message", async () => {
    const response = await webhookHandler({ secret, onEvent: () => Promise.reject(new Error("x")), onError() {} })(
      post(),
    );
    expect(await response.json()).toEqual({ error: { code: "handler_error", message: "the webhook handler failed" } });
  });

  it.each([
    [0, 0],
    [100, 100],
    ["100", 100],
    ["100b", 100],
    [" 2kb ", 2048],
    ["2KB", 2048],
    ["1.5kb", 1536],
    ["1.25KB", 1280],
    ["1mb", 1048576],
    ["0.5mb", 524288],
  ])("takes limit %j as %i bytes: that many pass, one more is 413", async (limit, bytes) => {
    const handler = webhookHandler({ secret, limit, onEvent: () => {} });
    const send = (size: number) =>
      handler(post({ "service-signature": "0".repeat(64) }, new Uint8Array(size))).then((r) => r.status);
    expect(await send(bytes)).toBe(401); // within the limit: refused only for its signature
    expect(await send(bytes + 1)).toBe(413);
  });

  it.each(["", "lots", "10 tb", "x10kb", "10kbx", "1.kb", "-1", "1e3"])("refuses limit %j when created", (limit) => {
    expect(() => webhookHandler({ secret, limit, onEvent: () => {} })).toThrow(
      `flag-webhooks: option "limit" must be a non-negative whole number of bytes or a size such as "512kb", got ${JSON.stringify(limit)}`,
    );
  });

  it.each([-1, -1024, 1.5, Number.NaN])("refuses the number %s when the handler is made, naming it", (limit) => {
    expect(() => webhookHandler({ secret, limit, onEvent: () => {} })).toThrow(
      new TypeError(
        `flag-webhooks: option "limit" must be a non-negative whole number of bytes or a size such as "512kb", got ${JSON.stringify(limit)}`,
      ),
    );
  });

  it("takes 0: only an empty body passes", async () => {
    const handler = webhookHandler({ secret, limit: 0, onEvent: () => {} });
    const post = async (text: string) =>
      handler(
        new Request("http://localhost/webhooks", {
          method: "POST",
          body: text,
          headers: { [SIGNATURE_HEADER]: await signatureOf(secret, text) },
        }),
      );
    expect((await post("{")).status).toBe(413);
    expect((await post("")).status).toBe(400); // authentic, within the limit, and not an event
  });

  it("checks options when it is created", () => {
    expect(() => webhookHandler(null as never)).toThrow('flag-webhooks: options with a "secret" are required');
    expect(() => webhookHandler({ secret: "", onEvent: () => {} })).toThrow(/"secret"/);
    expect(() => webhookHandler({ secret } as never)).toThrow(/"onEvent"/);
    expect(() => webhookHandler({ secret, limit: 1.5, onEvent: () => {} })).toThrow(/"limit"/);
  });
});

describe("verifyRequest", () => {
  it("returns the typed event", async () => {
    const event = await verifyRequest(post(), { secret });
    expect(event.type === "flag.updated" && event.data.actor.email).toBe("dana@example.com");
  });

  it("throws a WebhookError with code and status for a refused delivery", async () => {
    const error = await verifyRequest(post({}), { secret }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WebhookError);
    expect([(error as WebhookError).code, (error as WebhookError).status]).toEqual(["missing_signature", 401]);
  });

  it("rejects with a TypeError for a missing secret", async () => {
    await expect(verifyRequest(post(), { secret: "" })).rejects.toThrow(TypeError);
  });
});

describe("a body that arrives in several pieces (a stream)", () => {
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
    const response = await handler(streamed(body, n, { [SIGNATURE_HEADER]: await signatureOf(secret, body) }));
    expect(response.status).toBe(204);
    expect(seen).toEqual([JSON.parse(compact.body.toString("utf8")).id]);
  });

  it("refuses a body whose chunks, together, are not what was signed", async () => {
    const body = new Uint8Array(compact.body);
    const handler = webhookHandler({ secret, onEvent: () => {} });
    const response = await handler(
      streamed(body, 3, { [SIGNATURE_HEADER]: await signatureOf(secret, body.slice(0, 40)) }),
    );
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { code: "invalid_signature" } });
  });

  it("verifies an empty body as zero bytes", async () => {
    const handler = webhookHandler({ secret, onEvent: () => {} });
    const empty = new Request("http://localhost/webhooks", {
      method: "POST",
      body: new ReadableStream({ start: (controller) => controller.close() }),
      headers: { [SIGNATURE_HEADER]: await signatureOf(secret, "") },
      duplex: "half",
    } as never);
    const response = await handler(empty);
    // The signature of zero bytes matches: the body is then refused as no JSON, not as forged.
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: { code: "invalid_payload", message: "body is not valid JSON" } });
  });
});
