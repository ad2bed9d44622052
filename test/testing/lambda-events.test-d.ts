import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyHandler,
  APIGatewayProxyHandlerV2,
  Context,
  LambdaFunctionURLEvent,
} from "aws-lambda";
import {
  type LambdaContext,
  type LambdaProxyEventV1,
  type LambdaProxyEventV2,
  webhookHandler,
} from "flag-webhooks/lambda";
import {
  type LambdaTestContext,
  type LambdaTestEventV1,
  type LambdaTestEventV2,
  lambdaContext,
  signedLambdaEvent,
} from "flag-webhooks/testing";
import { describe, expectTypeOf, it } from "vitest";

// The test kit's Lambda events and context fit both flag-webhooks/lambda and @types/aws-lambda, so
// a test passes them to a handler of either type with no cast.

describe("signedLambdaEvent's types", () => {
  it("is a v2 event by default and a v1 event when asked", () => {
    expectTypeOf(signedLambdaEvent({ secret: "s", body: "{}" })).resolves.toEqualTypeOf<LambdaTestEventV2>();
    expectTypeOf(
      signedLambdaEvent({ secret: "s", body: "{}", version: "v2" }),
    ).resolves.toEqualTypeOf<LambdaTestEventV2>();
    expectTypeOf(
      signedLambdaEvent({ secret: "s", body: "{}", version: "v1" }),
    ).resolves.toEqualTypeOf<LambdaTestEventV1>();
  });

  it("fits flag-webhooks/lambda's events and @types/aws-lambda's", () => {
    expectTypeOf<LambdaTestEventV2>().toExtend<LambdaProxyEventV2>();
    expectTypeOf<LambdaTestEventV2>().toExtend<APIGatewayProxyEventV2>();
    expectTypeOf<LambdaTestEventV2>().toExtend<LambdaFunctionURLEvent>();
    expectTypeOf<LambdaTestEventV1>().toExtend<LambdaProxyEventV1>();
    expectTypeOf<LambdaTestEventV1>().toExtend<APIGatewayProxyEvent>();
    expectTypeOf<LambdaTestContext>().toExtend<LambdaContext>();
    expectTypeOf<LambdaTestContext>().toExtend<Context>();
  });

  it("calls handlers typed with @types/aws-lambda with no cast", async () => {
    const v2: APIGatewayProxyHandlerV2 = webhookHandler({ secret: "s", onEvent: () => {} });
    const v1: APIGatewayProxyHandler = webhookHandler({ secret: "s", onEvent: () => {} });
    await v2(await signedLambdaEvent({ secret: "s", body: "{}" }), lambdaContext(), () => {});
    await v1(await signedLambdaEvent({ secret: "s", body: "{}", version: "v1" }), lambdaContext(), () => {});
    // @ts-expect-error a REST API event is not an HTTP API 2.0 event
    await v2(await signedLambdaEvent({ secret: "s", body: "{}", version: "v1" }), lambdaContext(), () => {});
  });

  it("takes only the documented versions", () => {
    // @ts-expect-error "v3" is no API Gateway payload format
    signedLambdaEvent({ secret: "s", body: "{}", version: "v3" });
  });
});
