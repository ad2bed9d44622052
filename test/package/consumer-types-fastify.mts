// Type-checked with module Node16 against the packed .d.ts and the real fastify's types.
import Fastify from "fastify";
import type { WebhookEvent } from "flag-webhooks";
import { type FastifyWebhookOptions, webhookPlugin } from "flag-webhooks/fastify";

const app = Fastify();
const options: FastifyWebhookOptions = {
  path: "/webhooks",
  secret: "s",
  onEvent: (event, request, reply) => {
    const same: WebhookEvent | undefined = request.webhookEvent;
    return same === event ? { status: 202 } : reply.code(500).send();
  },
};
export const registered = app.register(webhookPlugin, options);
app.addHook("onResponse", async (request) => {
  if (request.webhookEvent?.type === "flag.updated") request.log.info(request.webhookEvent.data.flag);
});
