import type { WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import Koa from "koa";
import { describe, expectTypeOf, it } from "vitest";

// The Koa middleware's types: ctx.state.webhookEvent, and onEvent's ctx as the app's own context.

describe("Koa middleware types", () => {
  it("fits app.use in Koa and types ctx.state with WebhookState", () => {
    const app = new Koa<WebhookState>();
    app.use(koaMiddleware({ secret: "s", limit: 1024 }));
    app.use((ctx) => {
      expectTypeOf(ctx.state.webhookEvent).toEqualTypeOf<WebhookEvent>();
    });
  });
  it("Koa: ctx is the app's own context type when onEvent's parameter says so", () => {
    type AppContext = Koa.ParameterizedContext<{ user?: string }, { requestId: string }>;
    const app = new Koa<{ user?: string }, { requestId: string }>();
    app.use(
      koaMiddleware({
        secret: "s",
        onEvent: (_event, ctx: AppContext) => {
          expectTypeOf(ctx.requestId).toEqualTypeOf<string>();
          expectTypeOf(ctx.state.user).toEqualTypeOf<string | undefined>();
        },
      }),
    );
    app.use(koaMiddleware<AppContext>({ secret: "s", onEvent: (_event, ctx) => void ctx.requestId.length }));
  });
});
