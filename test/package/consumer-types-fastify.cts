// The CommonJS twin of consumer-types-fastify.mts: the .d.cts types, under module Node16.
import Fastify = require("fastify");
import fastifyEntry = require("flag-webhooks/fastify");

export const registered = Fastify().register(fastifyEntry.webhookPlugin, {
  path: "/webhooks",
  secret: ["new", "old"],
  onEvent: (event, request) => void request.log.info(event.type),
});
