import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import express from "express";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware, type WebhookRequest } from "flag-webhooks/express";
import { describe, expectTypeOf, it } from "vitest";

// The Express middleware's types: where it fits, req.webhookEvent, and onEvent's req and res as
// Express's own (or Node's), with no cast.

describe("Express middleware types", () => {
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
});
