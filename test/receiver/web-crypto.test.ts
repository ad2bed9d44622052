import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { signatureOf } from "../support/deliveries.js";

// The receiver where verification is asynchronous: a runtime without node:crypto (a Worker
// without nodejs_compat, a browser-like runtime) verifies with Web Crypto, so the event arrives
// as a promise and the receiver's asynchronous steps run. The real runtimes run the shared cases
// in test/runtimes/ and test/queues/cloudflare.test.ts, from dist/; here the same path runs in
// Node from src/, where the receiver's mutation run can see it: the package is loaded afresh with
// process.getBuiltinModule taken away, as such a runtime offers none.

type Fetch = typeof import("flag-webhooks/fetch");
type Core = typeof import("flag-webhooks");
let fetchAdapter: Fetch;
let core: Core;
const subtleVerify = vi.spyOn(globalThis.crypto.subtle, "verify");

beforeAll(async () => {
  vi.resetModules();
  const original = process.getBuiltinModule;
  Reflect.deleteProperty(process, "getBuiltinModule");
  try {
    fetchAdapter = await import("flag-webhooks/fetch");
    core = await import("flag-webhooks");
  } finally {
    process.getBuiltinModule = original;
  }
});

afterAll(() => {
  subtleVerify.mockRestore();
  vi.resetModules();
});

const secret = "web-crypto-receiver-secret";
const sign = (text: string, key = secret) => signatureOf(key, text);

function body(id = `evt_${randomUUID()}`, createdAt = new Date().toISOString()): string {
  return JSON.stringify({
    id,
    type: "flag.updated",
    createdAt,
    environment: "production",
    data: { flag: "f", changes: [], actor: { type: "user", email: "a@example.com" } },
  });
}

async function request(text: string, signature?: string): Promise<Request> {
  return new Request("http://localhost/webhooks", {
    method: "POST",
    headers: { [core.SIGNATURE_HEADER]: signature ?? (await sign(text)) },
    body: text,
  });
}

async function answer(response: Response) {
  const text = await response.text();
  return {
    status: response.status,
    duplicate: response.headers.get("webhook-duplicate"),
    body: text === "" ? null : JSON.parse(text),
  };
}

describe("the receiver over Web Crypto (no node:crypto)", () => {
  it("verifies with Web Crypto and hands the event to onEvent", async () => {
    subtleVerify.mockClear();
    const seen: unknown[] = [];
    const text = body("evt_web_1");
    const response = await fetchAdapter.webhookHandler({
      secret,
      onEvent: (event) => void seen.push([event.id, event.type]),
    })(await request(text));
    expect(await answer(response)).toEqual({ status: 204, duplicate: null, body: null });
    expect(seen).toEqual([["evt_web_1", "flag.updated"]]);
    expect(subtleVerify).toHaveBeenCalled();
  });

  it("refuses a forged delivery with 401 invalid_signature, before onEvent", async () => {
    const onEvent = vi.fn();
    const text = body();
    const response = await fetchAdapter.webhookHandler({ secret, onEvent, onError: () => {} })(
      await request(text, await sign(text, "another-secret")),
    );
    expect(await answer(response)).toEqual({
      status: 401,
      duplicate: null,
      body: { error: { code: "invalid_signature", message: expect.any(String) } },
    });
    expect(onEvent).not.toHaveBeenCalled();
  });

  it("refuses an authentic delivery older than maxAge, after verifying it", async () => {
    const onEvent = vi.fn();
    const text = body(undefined, new Date(Date.now() - 3_600_000).toISOString());
    const response = await fetchAdapter.webhookHandler({ secret, maxAge: "5m", onEvent })(await request(text));
    const seen = await answer(response);
    expect(seen.status).toBe(401);
    expect(seen.body.error.code).toBe("event_expired");
    expect(onEvent).not.toHaveBeenCalled();
  });

  it("tells onVerified which secret matched", async () => {
    const told: number[] = [];
    const response = await fetchAdapter.webhookHandler({
      secret: ["a-newer-secret", secret],
      onEvent: () => {},
      onVerified: (_event, info) => void told.push(info.secretIndex),
    })(await request(body()));
    expect(response.status).toBe(204);
    expect(told).toEqual([1]);
  });

  it("claims the id after verifying: a second copy is a duplicate, a forged copy does not claim it", async () => {
    const store = new core.MemoryDedupeStore();
    const runs: string[] = [];
    const handle = fetchAdapter.webhookHandler({
      secret,
      dedupe: { store, ttl: "1h" },
      onEvent: (event) => void runs.push(event.id),
      onError: () => {},
    });
    const text = body("evt_web_dedupe");
    expect((await handle(await request(text, await sign(text, "forger")))).status).toBe(401);
    expect(await answer(await handle(await request(text)))).toEqual({ status: 204, duplicate: null, body: null });
    expect(await answer(await handle(await request(text)))).toEqual({ status: 204, duplicate: "true", body: null });
    expect(runs).toEqual(["evt_web_dedupe"]);
  });

  it("verifyEvent resolves the event, and rejects a forged one with WebhookError", async () => {
    const text = body("evt_web_verify");
    await expect(core.verifyEvent({ secret, payload: text, signature: await sign(text) })).resolves.toMatchObject({
      id: "evt_web_verify",
    });
    await expect(
      core.verifyEvent({ secret, payload: text, signature: await sign(text, "forger") }),
    ).rejects.toBeInstanceOf(core.WebhookError);
  });
});
