// Type-checked with module Node16 against the packed .d.cts: CommonJS consumers get real types.
import { verifyEvent, WebhookError, type WebhookEvent } from "flag-webhooks";

export async function handle(body: Buffer, signature: string | undefined): Promise<string> {
  try {
    const event: WebhookEvent = await verifyEvent({ secret: "s", payload: body, signature });
    if (event.type === "flag.updated") return event.data.actor.email;
    return event.type;
  } catch (error) {
    if (error instanceof WebhookError) return error.code;
    throw error;
  }
}

// Every adapter entry resolves with types from CommonJS under Node16 too.
import { webhookMiddleware as express } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as hono, type WebhookEnv } from "flag-webhooks/hono";
import { webhookMiddleware as koa, type WebhookState } from "flag-webhooks/koa";
import { type LambdaProxyResult, webhookHandler as lambda } from "flag-webhooks/lambda";

export const handlers = [express({ secret: "s" }), koa({ secret: "s" }), webhookHandler({ secret: "s", onEvent() {} })];
export const honoMiddleware = hono({ secret: "s" });
export type HonoVariables = WebhookEnv["Variables"];
export const lambdaResult: Promise<LambdaProxyResult> = lambda({ secret: "s", onEvent() {} })(
  { httpMethod: "POST", headers: {}, body: null, isBase64Encoded: false },
  { awsRequestId: "r", getRemainingTimeInMillis: () => 1000 },
);
export type State = WebhookState;

import { createEmulator, type Delivery } from "flag-webhooks/emulator";

export const deliveries: Promise<Delivery[]> = createEmulator().then((emulator) => emulator.deliveries());

import { consumeEvents, type DedupeObject } from "flag-webhooks/cloudflare";

export const queueHandler = consumeEvents({ onEvent: (event) => event.type });
export type ObjectClass = typeof DedupeObject;

import { type InboxClient, PostgresInbox } from "flag-webhooks/postgres";

declare const own: InboxClient<{ run(text: string): Promise<void> }>;
export const inboxOnEvent = new PostgresInbox(own, { scope: "consumer" }).handle((event, tx) => tx.run(event.id));
