import { type MiddlewareConsumer, Module, type NestModule } from "@nestjs/common";
import { webhookMiddleware } from "flag-webhooks/express";
import { WebhooksController } from "./webhooks.controller.js";

@Module({ controllers: [WebhooksController] })
export class AppModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    // Every method on the path goes through it, so a GET gets our 405 with Allow: POST. It takes
    // the bytes Nest keeps in req.rawBody (rawBody: true in main.ts) or reads the stream itself.
    consumer.apply(webhookMiddleware({ secret: process.env.WEBHOOK_SECRET ?? "" })).forRoutes("webhooks");
  }
}
