import {
  createRouter,
  type FlagCreatedEvent,
  type FlagDeletedEvent,
  type FlagUpdatedEvent,
  type UnknownWebhookEvent,
  type WebhookEvent,
} from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { describe, expectTypeOf, it } from "vitest";

describe("router types", () => {
  it("narrows the event to the routed type, with no casts", () => {
    createRouter().on("flag.updated", (event) => {
      expectTypeOf(event).toEqualTypeOf<FlagUpdatedEvent>();
      expectTypeOf(event.data.actor.email).toBeString();
    });
    createRouter().on(["flag.created", "flag.deleted"], (event) => {
      expectTypeOf(event).toEqualTypeOf<FlagCreatedEvent | FlagDeletedEvent>();
    });
    createRouter().on("unknown", (event) => {
      expectTypeOf(event).toEqualTypeOf<UnknownWebhookEvent>();
      expectTypeOf(event.originalType).toBeString();
    });
    createRouter().onAny((event) => {
      expectTypeOf(event).toEqualTypeOf<WebhookEvent>();
    });
  });

  it("does not compile a misspelt event type", () => {
    // @ts-expect-error "flag.update" is not an event type
    createRouter().on("flag.update", () => {});
    // @ts-expect-error nor is one in a list
    createRouter().on(["flag.created", "flag.delete"], () => {});
  });

  it("is itself a valid onEvent for every adapter", () => {
    const router = createRouter().on("flag.updated", () => {});
    webhookHandler({ secret: "s", onEvent: router });
    expressMiddleware({ secret: "s", onEvent: router });
    koaMiddleware({ secret: "s", onEvent: router });
  });
});
