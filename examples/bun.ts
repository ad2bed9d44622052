// Bun: `WEBHOOK_SECRET=... bun examples/bun.ts`, then POST deliveries to http://localhost:3000/.
import { webhookHandler } from "flag-webhooks/fetch";

const handler = webhookHandler({
  secret: process.env.WEBHOOK_SECRET ?? "",
  onEvent: (event) => Response.json({ received: event.id, type: event.type }),
});

const server = Bun.serve({ port: Number(process.env.PORT ?? 3000), hostname: "127.0.0.1", fetch: handler });
console.log(`listening on ${server.url}`);
