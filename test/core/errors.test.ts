import { WebhookError } from "flag-webhooks";
import { describe, expect, it } from "vitest";
import { backends } from "../support/backends.js";

// WebhookError: each code's status, and `instanceof`. The class checks a brand, not its
// prototype chain, so that two copies of the package (a CommonJS and an ES module one loaded
// together) know each other's errors; a subclass must still answer for itself, not for the
// brand its parent's static Symbol.hasInstance checks.

describe("WebhookError", () => {
  it.each([
    ["missing_signature", 401],
    ["invalid_signature", 401],
    ["invalid_payload", 400],
    ["payload_too_large", 413],
    ["method_not_allowed", 405],
    ["body_already_parsed", 500],
    ["handler_error", 500],
  ] as const)("maps %s to status %i", (code, status) => {
    const error = new WebhookError(code, "m");
    expect([error.status, error.code, error.name, error.message]).toEqual([status, code, "WebhookError", "m"]);
    expect(error).toBeInstanceOf(Error);
  });

  it("is not claimed by instanceof for plain errors or look-alikes", () => {
    expect(new Error("x")).not.toBeInstanceOf(WebhookError);
    expect({ code: "invalid_payload", status: 400 }).not.toBeInstanceOf(WebhookError);
    expect(null).not.toBeInstanceOf(WebhookError);
  });
});

class QueueFull extends WebhookError<"store_unavailable"> {
  constructor() {
    super("store_unavailable", "the queue is full; retry later");
  }
}

describe("instanceof a subclass of WebhookError", () => {
  it("is false for a plain WebhookError: `catch (e) { if (e instanceof QueueFull) … }` must not catch every refusal", () => {
    const refused = new WebhookError("invalid_signature", "Service-Signature does not match");
    // Answering for the brand would make an app's handler for its own error run for every invalid signature.
    expect(refused instanceof QueueFull).toBe(false);
  });

  it("still holds where it should: a subclass instance is a WebhookError and a QueueFull", () => {
    const full = new QueueFull();
    expect(full instanceof WebhookError).toBe(true);
    expect(full instanceof QueueFull).toBe(true);
    expect(new Error("x") instanceof WebhookError).toBe(false);
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
});
