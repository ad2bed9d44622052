// Deno: `WEBHOOK_SECRET=... deno run --allow-env --allow-net examples/deno.ts`.
import { webhookHandler } from "flag-webhooks/fetch";

const handler = webhookHandler({
  secret: Deno.env.get("WEBHOOK_SECRET") ?? "",
  onEvent: (event) => Response.json({ received: event.id, type: event.type }),
});

Deno.serve({ port: Number(Deno.env.get("PORT") ?? 3000), hostname: "127.0.0.1" }, handler);
