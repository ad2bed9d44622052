import { createEvent, signedDelivery, signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";

// The test kit's edges: overrides that are not plain objects, objects without a prototype, events
// a test changes afterwards, and options that are not an object at all.
describe("createEvent overrides", () => {
  it("replaces a default object with an array, a string or null instead of merging into it", () => {
    expect(createEvent("flag.created", { data: ["a"] as never }).data).toEqual(["a"]);
    expect(createEvent("flag.updated", { data: { actor: "system" as never } }).data.actor).toBe("system");
    expect(createEvent("flag.updated", { data: { actor: null as never } }).data.actor).toBeNull();
  });

  it("merges an override object without a prototype like a plain one", () => {
    const actor = Object.assign(Object.create(null), { email: "ops@example.com" });
    const event = createEvent("flag.updated", { data: { actor } });
    expect(event.data.actor).toEqual({ type: "user", email: "ops@example.com" });
  });

  it("gives fields a test can change and delete afterwards", () => {
    const event = createEvent("flag.updated", { environment: "staging", data: { flag: "dark-mode" } });
    event.environment = "production";
    event.data.flag = "light-mode";
    delete (event.data as { actor?: unknown }).actor;
    expect([event.environment, event.data.flag, "actor" in event.data]).toEqual(["production", "light-mode", false]);
  });
});

describe("createEvent defaults", () => {
  it.each(["flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"] as const)(
    "gives %s the data { flag: 'new-checkout' }",
    (type) => {
      expect(createEvent(type).data).toEqual({ flag: "new-checkout" });
    },
  );

  it("lets a test delete a field it overrode", () => {
    const event = createEvent("flag.deleted", { data: { flag: "gone" } });
    delete (event.data as { flag?: string }).flag;
    expect(event.data).toEqual({});
  });
});

describe("options that are not an object", () => {
  it.each([null, undefined, "s3cr3t"])("refuses %s with a TypeError that says what is needed", async (options) => {
    const message = 'flag-webhooks/testing: options with a "secret" and an "event" or a "body" are required';
    await expect(signedDelivery(options as never)).rejects.toThrow(new TypeError(message));
    await expect(signedRequest(options as never)).rejects.toThrow(new TypeError(message));
  });
});
