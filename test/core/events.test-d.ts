import {
  type Actor,
  type FlagChange,
  parseEvent,
  type UndocumentedData,
  verifyEvent,
  verifySignature,
  WebhookError,
  type WebhookErrorCode,
  type WebhookEvent,
  type WebhookEventType,
} from "flag-webhooks";
import { describe, expectTypeOf, it } from "vitest";

declare const event: WebhookEvent;

describe("WebhookEvent", () => {
  it("narrows every known type in a switch, with no casts", () => {
    switch (event.type) {
      case "flag.updated":
        expectTypeOf(event.data.flag).toEqualTypeOf<string>();
        expectTypeOf(event.data.changes).toEqualTypeOf<FlagChange[]>();
        expectTypeOf(event.data.changes[0]?.from).toEqualTypeOf<unknown>();
        expectTypeOf(event.data.actor).toEqualTypeOf<Actor>();
        expectTypeOf(event.data.actor.email).toEqualTypeOf<string>();
        break;
      case "flag.created":
      case "flag.deleted":
      case "rollout.step":
      case "rollout.guard_triggered":
        expectTypeOf(event.data).toEqualTypeOf<UndocumentedData>();
        // @ts-expect-error undocumented data has no typed fields: data.flag is unknown, not string
        event.data.flag.toUpperCase();
        break;
      case "unknown":
        expectTypeOf(event.originalType).toEqualTypeOf<string>();
        expectTypeOf(event.data).toEqualTypeOf<unknown>();
        break;
      default:
        // Exhaustive: every member was handled above.
        expectTypeOf(event).toEqualTypeOf<never>();
    }
  });

  it("narrows with if on type", () => {
    if (event.type === "flag.updated") expectTypeOf(event.data.changes[0]?.path).toEqualTypeOf<string | undefined>();
    if (event.type === "rollout.step") {
      // @ts-expect-error data of other types has no actor field typed
      event.data.actor.email;
    }
  });

  it("envelope fields are typed on every member", () => {
    expectTypeOf(event.id).toEqualTypeOf<string>();
    expectTypeOf(event.createdAt).toEqualTypeOf<string>();
    expectTypeOf(event.environment).toEqualTypeOf<string>();
  });

  it("lists the known types and refuses a misspelt one", () => {
    expectTypeOf<WebhookEventType>().toEqualTypeOf<
      "flag.updated" | "flag.created" | "flag.deleted" | "rollout.step" | "rollout.guard_triggered"
    >();
    // @ts-expect-error "flag.update" is not an event type
    if (event.type === "flag.update") return;
  });

  it("does not let data of flag.updated be used before narrowing", () => {
    // @ts-expect-error data.changes exists only on flag.updated
    event.data.changes;
  });
});

describe("function signatures", () => {
  it("returns the union from parseEvent and verifyEvent", () => {
    expectTypeOf(parseEvent).returns.toEqualTypeOf<WebhookEvent>();
    expectTypeOf(verifyEvent).returns.resolves.toEqualTypeOf<WebhookEvent>();
    expectTypeOf(verifySignature).returns.resolves.toEqualTypeOf<boolean>();
  });

  it("accepts a Node header value, and a rotation list as secret", () => {
    const headers: Record<string, string | string[] | undefined> = {};
    verifySignature({ secret: ["a", "b"], payload: new Uint8Array(), signature: headers["service-signature"] });
    verifySignature({ secret: "a", payload: "", signature: null });
  });

  it("refuses a parsed object as payload and a missing secret", () => {
    // @ts-expect-error a parsed body is not raw bytes
    verifySignature({ secret: "a", payload: { id: "x" }, signature: "" });
    // @ts-expect-error secret is required
    verifySignature({ payload: "", signature: "" });
  });

  it("types WebhookError.code as the literal union", () => {
    expectTypeOf<WebhookError["code"]>().toEqualTypeOf<WebhookErrorCode>();
    expectTypeOf<"invalid_signature">().toExtend<WebhookErrorCode>();
    // @ts-expect-error not a code
    new WebhookError("nope", "m");
  });
});
