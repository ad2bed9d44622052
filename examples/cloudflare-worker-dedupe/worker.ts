// A Cloudflare Worker that receives deliveries, handles each event id once across every location
// (Durable Objects), answers 202 as soon as a Queue holds the event, and consumes the queue in the
// same Worker: the consumer keeps the last change of each flag in KV. wrangler.toml binds it all;
// `wrangler secret put WEBHOOK_SECRET`, then `wrangler deploy`.
import type { DurableObjectNamespace, KVNamespace, Queue } from "@cloudflare/workers-types";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { consumeEvents, DedupeObject, DurableObjectDedupeStore, enqueueTo } from "flag-webhooks/cloudflare";
import { webhookHandler } from "flag-webhooks/fetch";

// The Durable Object class the DEDUPE binding names: re-exported from the Worker's main module.
export { DedupeObject };

export interface Env {
  WEBHOOK_SECRET: string;
  DEDUPE: DurableObjectNamespace;
  FLAG_EVENTS: Queue<WebhookEvent>;
  AUDIT: KVNamespace;
}

const audit = createRouter<[unknown, Env, unknown]>()
  .on("flag.updated", async (event, _message, env) => {
    const { flag, actor, changes } = event.data;
    await env.AUDIT.put(`flag:${flag}`, JSON.stringify({ event: event.id, by: actor.email, changes }));
  })
  .on("flag.deleted", async (event, _message, env) => {
    // Undocumented data: checked, not trusted.
    const { flag } = event.data;
    if (typeof flag === "string") await env.AUDIT.delete(`flag:${flag}`);
  });

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    return webhookHandler({
      secret: env.WEBHOOK_SECRET,
      maxAge: "5m",
      // Every instance of this Worker shares one set of ids under the scope "flag-audit".
      dedupe: { store: new DurableObjectDedupeStore(env.DEDUPE, { scope: "flag-audit" }), ttl: "24h" },
      onEvent: enqueueTo(env.FLAG_EVENTS),
    })(request);
  },
  // A throwing handler retries the message (max_retries in wrangler.toml, then the dead-letter queue).
  queue: consumeEvents<Env>({ onEvent: audit }),
};
