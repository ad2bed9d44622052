import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { createRouter, type WebhookEvent } from "flag-webhooks";
import { webhookPlugin } from "flag-webhooks/fastify";
import { describe, expectTypeOf, it } from "vitest";

describe("Fastify plugin types", () => {
  it("checks the options app.register passes, and types onEvent's arguments", () => {
    const app = Fastify();
    void app.register(webhookPlugin, {
      path: "/webhooks",
      secret: ["new", "old"],
      limit: "512kb",
      maxAge: "5m",
      prefix: "/hooks",
      onEvent(event, request, reply) {
        expectTypeOf(event).toEqualTypeOf<WebhookEvent>();
        expectTypeOf(request).toEqualTypeOf<FastifyRequest>();
        expectTypeOf(reply).toEqualTypeOf<FastifyReply>();
        return { status: 202 };
      },
    });
    // @ts-expect-error path is required
    void app.register(webhookPlugin, { secret: "s", onEvent: () => {} });
    // @ts-expect-error onEvent is required
    void app.register(webhookPlugin, { path: "/webhooks", secret: "s" });
    // @ts-expect-error limit is a number or a size string
    void app.register(webhookPlugin, { path: "/webhooks", secret: "s", onEvent: () => {}, limit: true });
  });

  it("types request.webhookEvent on FastifyRequest by declaration merging", () => {
    const app = Fastify();
    app.addHook("onResponse", async (request) => {
      expectTypeOf(request.webhookEvent).toEqualTypeOf<WebhookEvent | undefined>();
    });
  });

  it("takes a router typed with Fastify's request and reply", () => {
    const router = createRouter<[FastifyRequest, FastifyReply]>().on("flag.updated", (event, request, reply) => {
      expectTypeOf(event.data.flag).toEqualTypeOf<string>();
      expectTypeOf(request.webhookEvent).toEqualTypeOf<WebhookEvent | undefined>();
      return reply.code(202).send();
    });
    void Fastify().register(webhookPlugin, { path: "/webhooks", secret: "s", onEvent: router });
  });
});
