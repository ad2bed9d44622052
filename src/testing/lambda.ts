// Signed deliveries as AWS Lambda receives them through API Gateway or a function URL, for
// testing a flag-webhooks/lambda handler (or any handler of those events) without AWS. The types
// are written out in full, so that @types/aws-lambda's event and context types accept them as
// they are, without this package depending on @types/aws-lambda.
import { type DeliveryOptions, headersFor, payloadOf } from "./sign.js";

/** Options of {@link signedLambdaEvent}: a secret, an event or a body, and which event format. */
export type LambdaEventOptions = DeliveryOptions & {
  /**
   * `"v2"` (default): an HTTP API event, payload format 2.0, which is also a function URL's;
   * `"v1"`: a REST API proxy event, which is also an HTTP API's with payload format 1.0.
   */
  version?: "v1" | "v2";
  /** The request's path; default `"/webhooks"`. */
  path?: string;
};

/**
 * An HTTP API (payload format 2.0) or function URL event, as {@link signedLambdaEvent} makes it.
 * Assignable to `LambdaProxyEventV2` of flag-webhooks/lambda and to `APIGatewayProxyEventV2` of
 * @types/aws-lambda.
 */
export interface LambdaTestEventV2 {
  version: "2.0";
  routeKey: string;
  rawPath: string;
  rawQueryString: string;
  /** Lowercase names, as HTTP APIs and function URLs give them. */
  headers: Record<string, string>;
  requestContext: {
    accountId: string;
    apiId: string;
    domainName: string;
    domainPrefix: string;
    http: { method: string; path: string; protocol: string; sourceIp: string; userAgent: string };
    requestId: string;
    routeKey: string;
    stage: string;
    time: string;
    timeEpoch: number;
  };
  body: string;
  isBase64Encoded: boolean;
}

/**
 * A REST API proxy event (also an HTTP API's with payload format 1.0), as
 * {@link signedLambdaEvent} makes it. Assignable to `LambdaProxyEventV1` of flag-webhooks/lambda
 * and to `APIGatewayProxyEvent` of @types/aws-lambda.
 */
export interface LambdaTestEventV1 {
  resource: string;
  path: string;
  httpMethod: string;
  /** Names as the sender spelt them (`Service-Signature`). */
  headers: Record<string, string>;
  multiValueHeaders: Record<string, string[]>;
  queryStringParameters: null;
  multiValueQueryStringParameters: null;
  pathParameters: null;
  stageVariables: null;
  requestContext: {
    accountId: string;
    apiId: string;
    authorizer: undefined;
    domainName: string;
    domainPrefix: string;
    extendedRequestId: string;
    httpMethod: string;
    identity: {
      accessKey: null;
      accountId: null;
      apiKey: null;
      apiKeyId: null;
      caller: null;
      clientCert: null;
      cognitoAuthenticationProvider: null;
      cognitoAuthenticationType: null;
      cognitoIdentityId: null;
      cognitoIdentityPoolId: null;
      principalOrgId: null;
      sourceIp: string;
      user: null;
      userAgent: string;
      userArn: null;
    };
    path: string;
    protocol: string;
    requestId: string;
    requestTime: string;
    requestTimeEpoch: number;
    resourceId: string;
    resourcePath: string;
    stage: string;
  };
  body: string;
  isBase64Encoded: boolean;
}

/** Options of {@link lambdaContext}. */
export interface LambdaContextOptions {
  /** The function's name; default `"flag-webhooks-test"`. */
  functionName?: string;
  /** The invocation's time limit, in ms, that `getRemainingTimeInMillis()` counts down from; default 3000 (Lambda's default timeout). */
  timeoutMs?: number;
}

/**
 * A Lambda context object, as {@link lambdaContext} makes it. Assignable to `LambdaContext` of
 * flag-webhooks/lambda and to `Context` of @types/aws-lambda.
 */
export interface LambdaTestContext {
  callbackWaitsForEmptyEventLoop: boolean;
  functionName: string;
  functionVersion: string;
  invokedFunctionArn: string;
  memoryLimitInMB: string;
  awsRequestId: string;
  logGroupName: string;
  logStreamName: string;
  getRemainingTimeInMillis(): number;
  /** The callback-era completion functions: they throw, as a handler under test should return instead. */
  done(error?: Error, result?: unknown): void;
  fail(error: Error | string): void;
  succeed(messageOrObject: unknown, object?: unknown): void;
}

/**
 * Signs an event or a body with `secret` and returns it as the event Lambda gets for a POST
 * through an HTTP API or a function URL (`version: "v2"`, the default) or a REST API
 * (`version: "v1"`), with the service's headers. A body that is UTF-8 is passed as text, as API
 * Gateway passes JSON; other bytes are base64 with `isBase64Encoded: true`, the only way API
 * Gateway can pass them.
 *
 * @example
 * ```ts
 * import { webhookHandler } from "flag-webhooks/lambda";
 * import { createEvent, lambdaContext, signedLambdaEvent } from "flag-webhooks/testing";
 *
 * const handler = webhookHandler({ secret: "s3cr3t", onEvent: (event) => console.log(event.type) });
 * const lambdaEvent = await signedLambdaEvent({ secret: "s3cr3t", event: createEvent("flag.updated") });
 * const result = await handler(lambdaEvent, lambdaContext()); // { statusCode: 204, ... }
 * ```
 */
export function signedLambdaEvent(options: LambdaEventOptions & { version: "v1" }): Promise<LambdaTestEventV1>;
export function signedLambdaEvent(options: LambdaEventOptions & { version?: "v2" }): Promise<LambdaTestEventV2>;
export function signedLambdaEvent(options: LambdaEventOptions): Promise<LambdaTestEventV1 | LambdaTestEventV2>;
export async function signedLambdaEvent(options: LambdaEventOptions): Promise<LambdaTestEventV1 | LambdaTestEventV2> {
  const payload = payloadOf(options);
  const { version = "v2", path = "/webhooks" } = options;
  if (version !== "v1" && version !== "v2") {
    throw new TypeError('flag-webhooks/testing: option "version" must be "v1" or "v2"');
  }
  if (typeof path !== "string" || !path.startsWith("/")) {
    throw new TypeError('flag-webhooks/testing: option "path" must be a path that starts with "/"');
  }
  const headers = await headersFor(options.secret, payload);
  const request: LambdaRequest = { path, headers, payload, now: Date.now(), requestId: globalThis.crypto.randomUUID() };
  return version === "v2" ? httpApiEvent(request) : restApiEvent(request);
}

/** What an API Gateway event is made of, whichever version carries it. */
interface LambdaRequest {
  path: string;
  headers: Awaited<ReturnType<typeof headersFor>>;
  payload: Parameters<typeof lambdaBody>[0];
  now: number;
  requestId: string;
}

/** The request context every API Gateway event has. */
function commonContext({ requestId }: LambdaRequest) {
  return {
    accountId: "123456789012",
    apiId: "flagtest01",
    domainName: "flagtest01.execute-api.us-east-1.amazonaws.com",
    domainPrefix: "flagtest01",
    requestId,
  };
}

/** An HTTP API or function URL event (payload format 2.0). */
function httpApiEvent(request: LambdaRequest): LambdaTestEventV2 {
  const { path, headers, payload, now } = request;
  const { body, isBase64Encoded } = lambdaBody(payload);
  const common = commonContext(request);
  return {
    version: "2.0",
    routeKey: `POST ${path}`,
    rawPath: path,
    rawQueryString: "",
    headers: { ...headers, "content-length": String(byteLength(payload)), "user-agent": USER_AGENT },
    requestContext: {
      ...common,
      http: { method: "POST", path, protocol: "HTTP/1.1", sourceIp: SOURCE_IP, userAgent: USER_AGENT },
      routeKey: `POST ${path}`,
      stage: "$default",
      time: requestTime(now),
      timeEpoch: now,
    },
    body,
    isBase64Encoded,
  };
}

/** A REST API event (payload format 1.0), its headers as API Gateway spells them. */
function restApiEvent(request: LambdaRequest): LambdaTestEventV1 {
  const { path, headers, payload, now, requestId } = request;
  const { body, isBase64Encoded } = lambdaBody(payload);
  const common = commonContext(request);
  const v1Headers = {
    "Content-Type": headers["content-type"],
    "Service-Signature": headers["service-signature"],
    "User-Agent": USER_AGENT,
  };
  return {
    resource: path,
    path,
    httpMethod: "POST",
    headers: v1Headers,
    multiValueHeaders: Object.fromEntries(Object.entries(v1Headers).map(([name, value]) => [name, [value]])),
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    requestContext: {
      ...common,
      authorizer: undefined,
      extendedRequestId: requestId,
      httpMethod: "POST",
      identity: {
        accessKey: null,
        accountId: null,
        apiKey: null,
        apiKeyId: null,
        caller: null,
        clientCert: null,
        cognitoAuthenticationProvider: null,
        cognitoAuthenticationType: null,
        cognitoIdentityId: null,
        cognitoIdentityPoolId: null,
        principalOrgId: null,
        sourceIp: SOURCE_IP,
        user: null,
        userAgent: USER_AGENT,
        userArn: null,
      },
      path: `/prod${path}`,
      protocol: "HTTP/1.1",
      requestTime: requestTime(now),
      requestTimeEpoch: now,
      resourceId: "a1b2c3",
      resourcePath: path,
      stage: "prod",
    },
    body,
    isBase64Encoded,
  };
}

/**
 * A Lambda context object for calling a handler in a test: a fresh `awsRequestId` on every call,
 * and `getRemainingTimeInMillis()` counting down from `timeoutMs` (default 3000) from now.
 *
 * @example
 * ```ts
 * const result = await handler(await signedLambdaEvent({ secret, event }), lambdaContext({ timeoutMs: 10_000 }));
 * ```
 */
export function lambdaContext(options: LambdaContextOptions = {}): LambdaTestContext {
  const { functionName = "flag-webhooks-test", timeoutMs = 3000 } = options;
  if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
    throw new TypeError('flag-webhooks/testing: option "timeoutMs" must be a number of milliseconds');
  }
  const deadline = Date.now() + timeoutMs;
  const callbackStyle = (name: string) => () => {
    throw new Error(
      `flag-webhooks/testing: context.${name}() is the callback-era API; return from the handler instead`,
    );
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: "128",
    awsRequestId: globalThis.crypto.randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: "2026/01/01/[$LATEST]0123456789abcdef0123456789abcdef",
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: callbackStyle("done"),
    fail: callbackStyle("fail"),
    succeed: callbackStyle("succeed"),
  };
}

const USER_AGENT = "flag-webhooks-testing";
const SOURCE_IP = "203.0.113.10";
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The body as API Gateway passes it: UTF-8 as text, anything else base64. */
function lambdaBody(payload: string | Uint8Array): { body: string; isBase64Encoded: boolean } {
  if (typeof payload === "string") return { body: payload, isBase64Encoded: false };
  try {
    return { body: strictUtf8.decode(payload), isBase64Encoded: false };
  } catch {
    let binary = "";
    // In slices: String.fromCharCode takes its characters as arguments, and arguments are bounded.
    for (let i = 0; i < payload.length; i += 0x8000) {
      binary += String.fromCharCode(...payload.subarray(i, i + 0x8000));
    }
    return { body: btoa(binary), isBase64Encoded: true };
  }
}

function byteLength(payload: string | Uint8Array): number {
  return typeof payload === "string" ? new TextEncoder().encode(payload).byteLength : payload.byteLength;
}

/** API Gateway's request time: `21/Nov/2026:09:30:01 +0000`. */
function requestTime(ms: number): string {
  const date = new Date(ms);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(date.getUTCDate())}/${MONTHS[date.getUTCMonth()]}/${date.getUTCFullYear()}:${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} +0000`;
}
