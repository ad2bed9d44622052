import type { WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { verifyRequest, webhookHandler } from "flag-webhooks/fetch";
import { describe, expectTypeOf, it } from "vitest";

describe("fetch handler types", () => {
  it("types the fetch handler as Request → Promise<Response>", () => {
    const handler = webhookHandler({ secret: "s", onEvent: (event) => void event.id });
    expectTypeOf(handler).toEqualTypeOf<(request: Request) => Promise<Response>>();
    expectTypeOf(verifyRequest).returns.resolves.toEqualTypeOf<WebhookEvent>();
    // @ts-expect-error onEvent is required
    webhookHandler({ secret: "s" });
    // @ts-expect-error limit is a number or a size string
    expressMiddleware({ secret: "s", limit: true });
  });
});
