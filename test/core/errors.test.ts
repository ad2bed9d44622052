import { WebhookError } from "flag-webhooks";
import { describe, expect, it } from "vitest";

// Found by attacking issue 15 item 16: the static Symbol.hasInstance that narrows `err instanceof
// WebhookError` is inherited by every subclass, so `instanceof` a subclass answers for the brand,
// not the class. Failed on 832a504, before the fix.

class QueueFull extends WebhookError<"store_unavailable"> {
  constructor() {
    super("store_unavailable", "the queue is full; retry later");
  }
}

describe("instanceof a subclass of WebhookError", () => {
  it("is false for a plain WebhookError: `catch (e) { if (e instanceof QueueFull) … }` must not catch every refusal", () => {
    const refused = new WebhookError("invalid_signature", "Service-Signature does not match");
    // Before the fix: true, so an app's handler for its own error ran for every invalid signature.
    expect(refused instanceof QueueFull).toBe(false);
  });

  it("still holds where it should: a subclass instance is a WebhookError and a QueueFull", () => {
    const full = new QueueFull();
    expect(full instanceof WebhookError).toBe(true);
    expect(full instanceof QueueFull).toBe(true);
    expect(new Error("x") instanceof WebhookError).toBe(false);
  });
});
