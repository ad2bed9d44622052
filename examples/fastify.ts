// Fastify: `WEBHOOK_SECRET=... npx tsx examples/fastify.ts`, then POST deliveries to /webhooks.
import { fileURLToPath } from "node:url";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { createRouter } from "flag-webhooks";
import { webhookPlugin } from "flag-webhooks/fastify";
import { describeEvent } from "./handle-events.js";

export async function createApp(secret: string | string[]): Promise<FastifyInstance> {
  const app = Fastify();
  // The rest of your app keeps Fastify's JSON parser: the plugin's raw-bytes parser stays in its own context.
  app.post("/api/echo", async (request) => ({ echo: request.body }));

  // A typed router is a valid onEvent; its handlers get Fastify's request and reply too.
  const router = createRouter<[FastifyRequest, FastifyReply]>()
    .on("flag.updated", (event, request) => {
      request.log.info({ flag: event.data.flag }, "flag updated");
    })
    .onAny((event) => ({ status: 200, body: { received: event.id, summary: describeEvent(event) } }));

  await app.register(webhookPlugin, { path: "/webhooks", secret, onEvent: router });
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT ?? 3000);
  const app = await createApp(process.env.WEBHOOK_SECRET ?? "");
  await app.listen({ port, host: "127.0.0.1" });
  console.log(`listening on http://127.0.0.1:${port}/webhooks`);
}
