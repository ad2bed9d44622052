import type {
  FlagChange,
  FlagCreatedEvent,
  FlagUpdatedEvent,
  RolloutGuardTriggeredEvent,
  UndocumentedData,
  WebhookEventType,
} from "flag-webhooks";
import { createEvent, type SignedDelivery, signedDelivery, signedRequest } from "flag-webhooks/testing";
import { describe, expectTypeOf, it } from "vitest";

describe("createEvent", () => {
  it("narrows its return type with the type it is given", () => {
    expectTypeOf(createEvent("flag.updated")).toEqualTypeOf<FlagUpdatedEvent>();
    expectTypeOf(createEvent("flag.created")).toEqualTypeOf<FlagCreatedEvent>();
    expectTypeOf(createEvent("rollout.guard_triggered")).toEqualTypeOf<RolloutGuardTriggeredEvent>();
    expectTypeOf(createEvent("flag.updated").data.changes).toEqualTypeOf<FlagChange[]>();
    expectTypeOf(createEvent("flag.deleted").data).toEqualTypeOf<UndocumentedData>();
  });

  it("returns the union for a type known only as a union", () => {
    const type = "flag.updated" as "flag.updated" | "flag.created";
    expectTypeOf(createEvent(type)).toEqualTypeOf<FlagUpdatedEvent | FlagCreatedEvent>();
  });

  it("does not compile a misspelt or unknown type", () => {
    // @ts-expect-error "flag.update" is not an event type
    createEvent("flag.update");
    // @ts-expect-error "unknown" events come from the service, they are not made
    createEvent("unknown");
    expectTypeOf(createEvent).parameter(0).toEqualTypeOf<WebhookEventType>();
  });

  it("types overrides deeply, and arrays as whole arrays", () => {
    createEvent("flag.updated", { data: { actor: { email: "ops@example.com" } } });
    createEvent("flag.updated", { data: { changes: [{ path: "on", from: true, to: false }] } });
    createEvent("rollout.step", { data: { percent: 50 } });
    // @ts-expect-error the actor's email is a string
    createEvent("flag.updated", { data: { actor: { email: 42 } } });
    // @ts-expect-error an array replaces the default, so its items are whole changes
    createEvent("flag.updated", { data: { changes: [{ path: "on" }] } });
    // @ts-expect-error the type is fixed by the first argument, not overridden
    createEvent("flag.updated", { type: "flag.created" });
  });
});

describe("signedDelivery and signedRequest", () => {
  it("resolve headers that supertest's set() and fetch's HeadersInit take", async () => {
    const delivery = await signedDelivery({ secret: "s", event: createEvent("flag.updated") });
    expectTypeOf(delivery).toEqualTypeOf<SignedDelivery>();
    expectTypeOf(delivery.body).toEqualTypeOf<string>();
    expectTypeOf(delivery.headers).toExtend<Record<string, string>>();
    expectTypeOf(delivery.headers).toExtend<HeadersInit>();
    expectTypeOf(signedRequest({ secret: "s", body: "{}" })).resolves.toEqualTypeOf<Request>();
  });

  it("take an event or a body, not both", () => {
    // @ts-expect-error one of event and body
    signedDelivery({ secret: "s" });
    // @ts-expect-error not both
    signedDelivery({ secret: "s", event: createEvent("flag.updated"), body: "{}" });
    // @ts-expect-error a body is raw bytes or a string, not a parsed object
    signedDelivery({ secret: "s", body: { id: "evt_1" } });
  });
});
