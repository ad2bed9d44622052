import { createServer } from "node:http";
import express from "express";
import type { WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware, type WebhookRequest } from "flag-webhooks/express";
import { verifyRequest, webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware, type WebhookState } from "flag-webhooks/koa";
import Koa from "koa";
import { describe, expectTypeOf, it } from "vitest";

describe("adapter types", () => {
  it("fits app.post in Express and types req.webhookEvent by declaration merging", () => {
    const app = express();
    app.post("/webhooks", expressMiddleware({ secret: "s" }), (req, res) => {
      expectTypeOf(req.webhookEvent).toEqualTypeOf<WebhookEvent | undefined>();
      if (req.webhookEvent?.type === "flag.updated") expectTypeOf(req.webhookEvent.data.flag).toEqualTypeOf<string>();
      res.sendStatus(204);
    });
    app.use(expressMiddleware({ secret: ["new", "old"], limit: "512kb" }));
  });

  it("fits a plain node:http server", () => {
    const middleware = expressMiddleware({ secret: "s" });
    createServer((req, res) => {
      void middleware(req, res, () => {
        expectTypeOf((req as WebhookRequest).webhookEvent).toEqualTypeOf<WebhookEvent>();
      });
    });
  });

  it("fits app.use in Koa and types ctx.state with WebhookState", () => {
    const app = new Koa<WebhookState>();
    app.use(koaMiddleware({ secret: "s", limit: 1024 }));
    app.use((ctx) => {
      expectTypeOf(ctx.state.webhookEvent).toEqualTypeOf<WebhookEvent>();
    });
  });

  it("types the fetch handler as Request → Promise<Response>", () => {
    const handler = webhookHandler({ secret: "s", onEvent: (event) => void event.id });
    expectTypeOf(handler).toEqualTypeOf<(request: Request) => Promise<Response>>();
    expectTypeOf(verifyRequest).returns.resolves.toEqualTypeOf<WebhookEvent>();
    // @ts-expect-error onEvent is required
    webhookHandler({ secret: "s" });
    // @ts-expect-error limit is a number or a size string
    expressMiddleware({ secret: "s", limit: true });
  });
});
