import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyHandler,
  APIGatewayProxyHandlerV2,
  Context,
  LambdaFunctionURLHandler,
} from "aws-lambda";
import type { WebhookEvent } from "flag-webhooks";
import { type LambdaProxyEvent, type LambdaProxyResult, webhookHandler } from "flag-webhooks/lambda";
import { describe, expectTypeOf, it } from "vitest";

// The Lambda handler's types: @types/aws-lambda's handler types, and onEvent's Lambda event and
// context taken from the handler type it is assigned to.

describe("Lambda types", () => {
  it("is assignable to @types/aws-lambda's REST, HTTP API 2.0 and function URL handler types", () => {
    const handler = webhookHandler({ secret: "s", onEvent() {} });
    expectTypeOf(handler).toMatchTypeOf<APIGatewayProxyHandler>();
    expectTypeOf(handler).toMatchTypeOf<APIGatewayProxyHandlerV2>();
    expectTypeOf(handler).toMatchTypeOf<LambdaFunctionURLHandler>();
    const rest: APIGatewayProxyHandler = handler;
    const http: APIGatewayProxyHandlerV2 = handler;
    void [rest, http];
  });

  it("passes onEvent the event, the Lambda event and the context", () => {
    webhookHandler({
      secret: "s",
      onEvent(event, lambdaEvent, context) {
        expectTypeOf(event).toEqualTypeOf<WebhookEvent>();
        expectTypeOf(lambdaEvent).toEqualTypeOf<LambdaProxyEvent>();
        expectTypeOf(context.awsRequestId).toEqualTypeOf<string>();
      },
    });
    const context = {} as Context;
    expectTypeOf(webhookHandler({ secret: "s", onEvent() {} })).toBeCallableWith({ httpMethod: "POST" }, context);
    expectTypeOf(webhookHandler({ secret: "s", onEvent() {} })).returns.resolves.toEqualTypeOf<LambdaProxyResult>();
    // @ts-expect-error onEvent is required
    webhookHandler({ secret: "s" });
  });

  it("Lambda: the event and context are @types/aws-lambda's, from the handler type assigned to", () => {
    const v1: APIGatewayProxyHandler = webhookHandler({
      secret: "s",
      onEvent: (_event, lambdaEvent, context) => {
        expectTypeOf(lambdaEvent).toEqualTypeOf<APIGatewayProxyEvent>();
        expectTypeOf(context).toEqualTypeOf<Context>();
        return { statusCode: 202, body: context.functionName };
      },
    });
    const v2: APIGatewayProxyHandlerV2 = webhookHandler({
      secret: "s",
      onEvent: (_event, lambdaEvent) => {
        expectTypeOf(lambdaEvent).toEqualTypeOf<APIGatewayProxyEventV2>();
      },
    });
    expectTypeOf(v1).not.toBeAny();
    expectTypeOf(v2).not.toBeAny();
  });
});
