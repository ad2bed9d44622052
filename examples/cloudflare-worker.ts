// A Cloudflare Worker that receives deliveries. No compatibility flags needed: the library runs on
// Web Crypto when Node built-ins are absent. Set the secret with `wrangler secret put WEBHOOK_SECRET`.
import { webhookHandler } from "flag-webhooks/fetch";

interface Env {
  WEBHOOK_SECRET: string;
}

let handler: ((request: Request) => Promise<Response>) | undefined;

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    // The secret lives in env, so the handler is made on the first request and then reused.
    handler ??= webhookHandler({
      secret: env.WEBHOOK_SECRET,
      onEvent: (event) => Response.json({ received: event.id, type: event.type }),
    });
    return handler(request);
  },
};
