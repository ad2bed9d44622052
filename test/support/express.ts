import { createServer, type Server } from "node:http";
import express from "express";
import { type ExpressWebhookOptions, webhookMiddleware } from "flag-webhooks/express";

// The Express app of the README's quick start with onEvent, for the tests that need Express only
// as the host of the middleware: one place mounts it, so that each test shows only the options it
// is about.

/**
 * A server (not listening yet) of an Express app that receives deliveries at POST /webhooks
 * through the middleware with `options`; `after` adds to the app after that route (an error
 * handler, say).
 */
export function expressServer(
  options: ExpressWebhookOptions<express.Request, express.Response>,
  after?: (app: express.Express) => void,
): Server {
  const app = express();
  app.post("/webhooks", webhookMiddleware(options));
  after?.(app);
  return createServer(app);
}
