// A Cloudflare Worker that receives deliveries. No compatibility flags needed: the library runs on
// Web Crypto when Node built-ins are absent. Set the secret with `wrangler secret put WEBHOOK_SECRET`.
import { webhookHandler } from "flag-webhooks/fetch";

interface Env {
  WEBHOOK_SECRET: string;
}

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    // Built per request because the secret lives in env; creating a handler is cheap and the
    // imported HMAC key is cached per secret.
    const handler = webhookHandler({
      secret: env.WEBHOOK_SECRET,
      onEvent: (event) => Response.json({ received: event.id, type: event.type }),
    });
    return handler(request);
  },
};
