import {
  createRouter,
  type FlagCreatedEvent,
  type FlagDeletedEvent,
  type FlagUpdatedEvent,
  type UnknownWebhookEvent,
  type WebhookError,
  type WebhookErrorStatus,
  type WebhookEvent,
} from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { Hono } from "hono";
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

describe("WebhookError.status", () => {
  it("is a union of the statuses we answer, which Hono accepts as a status", () => {
    expectTypeOf<WebhookError["status"]>().toEqualTypeOf<400 | 401 | 405 | 408 | 409 | 413 | 500 | 503>();
    expectTypeOf<WebhookErrorStatus<"invalid_signature">>().toEqualTypeOf<401>();
    const app = new Hono();
    app.post("/", (c) => {
      const error = {} as WebhookError;
      return c.json({ error: { code: error.code, message: error.message } }, error.status);
    });
  });
});
