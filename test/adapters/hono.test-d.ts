import { toErrorBody, WebhookError, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/hono";
import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { describe, expectTypeOf, it } from "vitest";

describe("Hono types", () => {
  it("types c.var.webhookEvent and c.get('webhookEvent') in the route after the middleware, with no cast", () => {
    const app = new Hono();
    app.post("/webhooks", webhookMiddleware({ secret: "s" }), (c) => {
      expectTypeOf(c.var.webhookEvent).toEqualTypeOf<WebhookEvent>();
      expectTypeOf(c.get("webhookEvent")).toEqualTypeOf<WebhookEvent>();
      if (c.var.webhookEvent.type === "flag.updated")
        expectTypeOf(c.var.webhookEvent.data.flag).toEqualTypeOf<string>();
      return c.body(null, 204);
    });
  });

  it("keeps the app's own Bindings and Variables beside webhookEvent", () => {
    const app = new Hono<{ Bindings: { WEBHOOK_SECRET: string }; Variables: { user: string } }>();
    app.post("/webhooks", webhookMiddleware({ secret: "s" }), (c) => {
      expectTypeOf(c.env.WEBHOOK_SECRET).toEqualTypeOf<string>();
      expectTypeOf(c.var.user).toEqualTypeOf<string>();
      expectTypeOf(c.var.webhookEvent).toEqualTypeOf<WebhookEvent>();
      return c.body(null, 204);
    });
  });

  it("is a middleware as createMiddleware would type it", () => {
    const made = createMiddleware<{ Variables: { webhookEvent: WebhookEvent } }>(async (_c, next) => next());
    expectTypeOf(webhookMiddleware({ secret: "s" })).toMatchTypeOf<typeof made>();
  });

  it("passes onEvent the Hono context, and lets it return a Response", () => {
    webhookMiddleware({
      secret: "s",
      onEvent: (event, c) => c.json({ id: event.id }, 202),
    });
  });

  it("compiles c.json(toErrorBody(e), e.status): WebhookError.status is a union of sendable statuses", () => {
    const app = new Hono();
    app.onError((error, c) => {
      if (error instanceof WebhookError) return c.json(toErrorBody(error), error.status);
      return c.text("error", 500);
    });
  });
});
