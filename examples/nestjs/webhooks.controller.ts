import { Controller, HttpCode, Post, Req } from "@nestjs/common";
import type { Request } from "express";
import { describeEvent } from "../handle-events.js";

/**
 * The webhook route. AppModule puts flag-webhooks' Express middleware in front of it, so by the
 * time Nest calls `receive`, the delivery is verified and its typed event is on `req.webhookEvent`.
 */
@Controller("webhooks")
export class WebhooksController {
  @Post()
  @HttpCode(200)
  receive(@Req() req: Request): { received: string; summary: string } {
    const event = req.webhookEvent;
    if (!event) throw new Error("unreachable: the middleware sets webhookEvent before the controller");
    return { received: event.id, summary: describeEvent(event) };
  }
}
