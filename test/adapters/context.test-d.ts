import type { IncomingMessage, ServerResponse } from "node:http";
import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyHandler,
  APIGatewayProxyHandlerV2,
  Context,
} from "aws-lambda";
import express from "express";
import { createRouter, WebhookError, type WebhookErrorCode, type WebhookErrorStatus } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { webhookHandler } from "flag-webhooks/lambda";
import Koa from "koa";
import { describe, expectTypeOf, it } from "vitest";

// Issue 15 item 17: each adapter's onEvent context is the framework's own type, with no cast.

describe("onEvent context types", () => {
  it("Express: req and res are Express's own when onEvent's parameters say so, or the type arguments do", () => {
    const app = express();
    // Express's app.post is generic over its handler types, so nothing flows back into ours: the
    // parameters' annotations (or the type arguments) choose the types, and no cast is needed.
    app.post(
      "/webhooks",
      expressMiddleware({
        secret: "s",
        onEvent: (_event, req: express.Request, res: express.Response) => {
          expectTypeOf(req.ip).toEqualTypeOf<string | undefined>();
          res.status(202).json({ queued: true });
        },
      }),
    );
    app.post(
      "/webhooks",
      expressMiddleware<express.Request, express.Response>({
        secret: "s",
        onEvent: (_event, _req, res) => void res.status(202).json({ queued: true }),
      }),
    );
    // Without either, Node's own types: the middleware serves plain node:http too.
    expressMiddleware({
      secret: "s",
      onEvent: (_event, req, res) => {
        expectTypeOf(req).toEqualTypeOf<IncomingMessage>();
        expectTypeOf(res).toEqualTypeOf<ServerResponse>();
      },
    });
  });

  it("Express: a router typed with Express's request and response is an onEvent", () => {
    const router = createRouter<[express.Request, express.Response]>().on("flag.updated", (event, req, res) => {
      expectTypeOf(event.data.flag).toEqualTypeOf<string>();
      expectTypeOf(req.ip).toEqualTypeOf<string | undefined>();
      res.status(202).json({ flag: event.data.flag });
    });
    express().post("/webhooks", expressMiddleware({ secret: "s", onEvent: router }));
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

  it("Lambda: the event and context are @types/aws-lambda's, from the handler type assigned to", () => {
    const v1: APIGatewayProxyHandler = webhookHandler({
      secret: "s",
      onEvent: (_event, lambdaEvent, context) => {
        expectTypeOf(lambdaEvent).toEqualTypeOf<APIGatewayProxyEvent>();
        expectTypeOf(context).toEqualTypeOf<Context>();
        return { statusCode: 202, body: context.functionName };
      },
    });
    const v2: APIGatewayProxyHandlerV2 = webhookHandler({
      secret: "s",
      onEvent: (_event, lambdaEvent) => {
        expectTypeOf(lambdaEvent).toEqualTypeOf<APIGatewayProxyEventV2>();
      },
    });
    expectTypeOf(v1).not.toBeAny();
    expectTypeOf(v2).not.toBeAny();
  });
});

describe("WebhookError after instanceof (issue 15 item 16)", () => {
  it("narrows code and status to their unions, so a misspelt code does not compile", () => {
    const handle = (err: unknown) => {
      if (err instanceof WebhookError) {
        expectTypeOf(err.code).toEqualTypeOf<WebhookErrorCode>();
        expectTypeOf(err.status).toEqualTypeOf<WebhookErrorStatus>();
        // @ts-expect-error not a code
        if (err.code === "invalid_signatur") return 0;
        switch (err.code) {
          case "invalid_signature":
            return 1;
          default:
            return 2;
        }
      }
      return 3;
    };
    expectTypeOf(handle).returns.toEqualTypeOf<0 | 1 | 2 | 3>();
  });
});
