import { createRouter, type WebhookEvent } from "flag-webhooks";
import { describe, expect, it, vi } from "vitest";

const base = { id: "evt_1", createdAt: "2026-11-23T12:00:00Z", environment: "production" };
const updated = {
  ...base,
  type: "flag.updated",
  data: { flag: "f", changes: [], actor: { type: "user", email: "dana@example.com" } },
} as WebhookEvent;
const created = { ...base, type: "flag.created", data: {} } as WebhookEvent;
const deleted = { ...base, type: "flag.deleted", data: {} } as WebhookEvent;
const unknown = { ...base, type: "unknown", originalType: "flag.archived", data: {} } as WebhookEvent;

describe("createRouter", () => {
  it("runs only the handlers of the event's type, in the order they were added", async () => {
    const calls: string[] = [];
    const router = createRouter()
      .on("flag.updated", (e) => void calls.push(`a:${e.data.actor.email}`))
      .on("flag.created", () => void calls.push("created"))
      .on("flag.updated", () => void calls.push("b"));
    await router(updated);
    expect(calls).toEqual(["a:dana@example.com", "b"]);
  });

  it("routes a list of types to one handler", async () => {
    const seen: string[] = [];
    const router = createRouter().on(["flag.created", "flag.deleted"], (e) => void seen.push(e.type));
    for (const e of [created, deleted, updated]) await router(e);
    expect(seen).toEqual(["flag.created", "flag.deleted"]);
  });

  it("routes newer event types to 'unknown' and every event to onAny, after the typed handlers", async () => {
    const calls: string[] = [];
    const router = createRouter()
      .onAny((e) => void calls.push(`any:${e.type}`))
      .on("unknown", (e) => void calls.push(`unknown:${e.originalType}`));
    await router(unknown);
    await router(created);
    expect(calls).toEqual(["unknown:flag.archived", "any:unknown", "any:flag.created"]);
  });

  it("resolves with the first value a handler returns, so a handler can choose the answer", async () => {
    const router = createRouter()
      .on("flag.updated", () => undefined)
      .on("flag.updated", () => ({ status: 202 }))
      .onAny(() => "ignored");
    expect(await router(updated)).toEqual({ status: 202 });
    expect(await router(created)).toBe("ignored");
  });

  it("accepts an event no handler matches, and passes the adapter's context on", async () => {
    const handler = vi.fn();
    const router = createRouter<[request: Request]>().on("flag.deleted", handler);
    expect(await router(updated, new Request("http://x"))).toBeUndefined();
    const request = new Request("http://x");
    await router(deleted, request);
    expect(handler).toHaveBeenCalledWith(deleted, request);
  });

  it("propagates a handler's error, so the adapter answers 500 and the sender retries", async () => {
    const router = createRouter().on("flag.updated", async () => {
      throw new Error("boom");
    });
    await expect(router(updated)).rejects.toThrow("boom");
  });

  it("refuses a handler that is not a function when it is added", () => {
    expect(() => createRouter().on("flag.updated", "nope" as never)).toThrow(TypeError);
    expect(() => createRouter().onAny(undefined as never)).toThrow(/must be a function/);
  });

  it.each([[["flag.updated", 5]], [[null]], [5], [null], [{ length: 1 }]])(
    "refuses to route %j, saying what it takes",
    (types) => {
      expect(() => createRouter().on(types as never, () => {})).toThrow(
        new TypeError("flag-webhooks: router.on() takes an event type or a list of them"),
      );
    },
  );
});
