import { WebhookError, type WebhookErrorCode, type WebhookErrorStatus } from "flag-webhooks";
import { Hono } from "hono";
import { describe, expectTypeOf, it } from "vitest";

describe("WebhookError after instanceof", () => {
  it("narrows code and status to their unions, so a misspelt code does not compile", () => {
    const handle = (err: unknown) => {
      if (err instanceof WebhookError) {
        expectTypeOf(err.code).toEqualTypeOf<WebhookErrorCode>();
        expectTypeOf(err.status).toEqualTypeOf<WebhookErrorStatus>();
        // @ts-expect-error not a code
        if (err.code === "invalid_signatur") return 0;
        switch (err.code) {
          case "invalid_signature":
            return 1;
          default:
            return 2;
        }
      }
      return 3;
    };
    expectTypeOf(handle).returns.toEqualTypeOf<0 | 1 | 2 | 3>();
  });
});

describe("WebhookError.status", () => {
  it("is a union of the statuses we answer, which Hono accepts as a status", () => {
    expectTypeOf<WebhookError["status"]>().toEqualTypeOf<400 | 401 | 405 | 408 | 409 | 413 | 500 | 503>();
    expectTypeOf<WebhookErrorStatus<"invalid_signature">>().toEqualTypeOf<401>();
    const app = new Hono();
    app.post("/", (c) => {
      const error = {} as WebhookError;
      return c.json({ error: { code: error.code, message: error.message } }, error.status);
    });
  });
});
