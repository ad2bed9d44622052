import { createServer } from "node:http";
import { SIGNATURE_HEADER, verifyEvent, WebhookError } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { verifyRequest, webhookHandler } from "flag-webhooks/fetch";
import { afterEach, describe, expect, it, vi } from "vitest";
import { delivery } from "../support/deliveries.js";
import { post, serverPerTest } from "../support/http.js";
import { body, handler, request, SECRET } from "../support/receiver.js";

// The receiver's hooks (onVerified, onRejected, onError) and its clock: what each hook is told,
// that a hook that throws changes no answer, what the default onError writes, and that a clock
// that names no instant fails closed. The same hooks through every adapter:
// test/receiver/every-adapter.test.ts.

const secret = SECRET;
const serve = serverPerTest();
afterEach(() => {
  vi.restoreAllMocks();
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
    expect((await receive(await request())).status).toBe(500);
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
    expect((await thrower(await request())).status).toBe(500);
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
    })(await request());
    expect(verified.status).toBe(204);
    expect(errors).toEqual([hookError]);
    const rejected = await handler({
      onRejected: () => {
        throw hookError;
      },
      onError: () => {
        throw new Error("and the logger too");
      },
    })(await request(body(), { headers: {} }));
    expect(rejected.status).toBe(401);
  });

  it("onVerified is told the index of the secret that matched", async () => {
    const told: number[] = [];
    await handler({ secret: ["newer", SECRET], onVerified: (_e, info) => void told.push(info.secretIndex) })(
      await request(),
    );
    expect(told).toEqual([1]);
  });

  it.each([
    ["undefined", undefined, "undefined"],
    ["NaN", Number.NaN, "NaN"],
    ["a string", "2026-11-23T12:00:00Z", "string"],
    ["Infinity", Number.POSITIVE_INFINITY, "Infinity"],
  ])(
    "a clock that answers %s fails closed: a 25-year-old event gets 500, never the handler, and onError hears why",
    async (_, reading, shown) => {
      const errors: unknown[] = [];
      const ran = vi.fn();
      const old = body(undefined, "2001-01-01T00:00:00Z");
      const now = () => reading as number;
      const answer = await handler({ maxAge: "5m", now, onEvent: ran, onError: (e) => void errors.push(e) })(
        await request(old),
      );
      expect(answer.status).toBe(500);
      expect(ran).not.toHaveBeenCalled();
      expect(errors).toEqual([
        new TypeError(`flag-webhooks: option "now" must return a finite number of ms since the epoch, got ${shown}`),
      ]);
      // verifyEvent, with the same clock, refuses to decide too.
      const signature = (await request(old)).headers.get(SIGNATURE_HEADER);
      await expect(verifyEvent({ secret: SECRET, payload: old, signature, maxAge: "5m", now })).rejects.toThrow(
        TypeError,
      );
    },
  );

  it("the clock is read for the replay window only", async () => {
    const now = vi.fn(() => Date.now());
    await handler({ now })(await request());
    expect(now).not.toHaveBeenCalled();
    await handler({ now, maxAge: "5m" })(await request());
    expect(now).toHaveBeenCalledTimes(1);
  });

  it("a refusal is not an error: without onRejected, onError hears nothing", async () => {
    const errors: unknown[] = [];
    const answer = await handler({ onError: (e) => void errors.push(e) })(await request(body(), { headers: {} }));
    expect(answer.status).toBe(401);
    expect(errors).toEqual([]);
  });
});

describe("verifyRequest and onRejected", () => {
  it("verifyRequest tells onRejected of each refusal, and throws it", async () => {
    const rejected: string[] = [];
    const onRejected = (e: WebhookError) => void rejected.push(e.code);
    await expect(verifyRequest(await request(body(), { headers: {} }), { secret, onRejected })).rejects.toMatchObject({
      code: "missing_signature",
    });
    const event = await verifyRequest(await request(body("evt_ok")), { secret, onRejected });
    expect(event.id).toBe("evt_ok");
    expect(rejected).toEqual(["missing_signature"]);
    await expect(verifyRequest(await request(body(), { headers: {} }), { secret })).rejects.toMatchObject({
      code: "missing_signature",
    });
  });

  it("verifyRequest tells onRejected of WebhookErrors only, and logs nothing without it", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    await expect(verifyRequest(await request(body(), { headers: {} }), { secret })).rejects.toBeInstanceOf(
      WebhookError,
    );
    expect(log).not.toHaveBeenCalled();
    const rejected: unknown[] = [];
    const clockless = verifyRequest(await request(), {
      secret,
      maxAge: "5m",
      now: () => Number.NaN,
      onRejected: (e) => void rejected.push(e),
    });
    await expect(clockless).rejects.toBeInstanceOf(TypeError);
    expect(rejected).toEqual([]);
  });
});

describe("the receiver reports which secret signed (node:http, real requests)", () => {
  it("gives onVerified the index of the matching secret, for each secret of the list", async () => {
    const secrets = ["newest", "middle", "oldest"];
    const indexes: number[] = [];
    const middleware = webhookMiddleware({
      secret: secrets,
      onVerified: (_event, info) => indexes.push(info.secretIndex),
      onEvent: () => {},
    });
    const server = await serve(createServer((req, res) => void middleware(req, res, () => {})));
    for (const secret of [...secrets].reverse()) {
      expect((await post(server, await delivery(secret))).status).toBe(204);
    }
    expect(indexes).toEqual([2, 1, 0]);
  });
});
