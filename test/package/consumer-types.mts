// Type-checked with module Node16 against the packed .d.ts: ES module consumers get real types.
import { sign, type WebhookErrorCode, type WebhookEvent } from "flag-webhooks";

export const signature: Promise<string> = sign({ secret: "s", payload: new Uint8Array([1]) });
export function codeOf(event: WebhookEvent): string | WebhookErrorCode {
  return event.type === "unknown" ? event.originalType : event.type;
}

import { webhookMiddleware } from "flag-webhooks/express";
import { verifyRequest } from "flag-webhooks/fetch";
import { webhookMiddleware as honoMiddleware } from "flag-webhooks/hono";
import { webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import { Hono } from "hono";

export const middleware = webhookMiddleware({ secret: ["a", "b"], limit: "1mb" });
export const verified: (request: Request) => Promise<WebhookEvent> = (request) =>
  verifyRequest(request, { secret: "s" });

import { createEmulator, type Emulator } from "flag-webhooks/emulator";

export const emulator: Promise<Emulator> = createEmulator({ retry: { initialDelayMs: 10 } });
export const app = new Hono().post("/webhooks", honoMiddleware({ secret: "s" }), (c) =>
  c.text(c.var.webhookEvent.type),
);
export const lambda = lambdaHandler({ secret: "s", onEvent: (event, lambdaEvent) => void [event.id, lambdaEvent] });

// The serverless stores: the AWS SDK's client as the user has it, and the Workers bindings typed
// structurally (no @cloudflare/workers-types needed to compile).
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  consumeEvents,
  type DedupeNamespace,
  DurableObjectDedupeStore,
  type EventQueue,
  enqueueTo,
} from "flag-webhooks/cloudflare";
import { DynamoDBDedupeStore, dedupeTable } from "flag-webhooks/dynamodb";

export const dynamo = new DynamoDBDedupeStore(new DynamoDBClient({}), { table: "dedupe", scope: "app" });
export const ttlAttribute: "expiresAt" = dedupeTable.TimeToLiveSpecification.AttributeName;
export const objects = (namespace: DedupeNamespace) => new DurableObjectDedupeStore(namespace, { scope: "app" });
export const handOff = (queue: EventQueue) => enqueueTo(queue, { timeout: "2s" });
export const consumer = consumeEvents({ onEvent: (event) => event.id });

// flag-webhooks/postgres with no Postgres client installed: its types name none, so an
// InboxClient of the consumer's own types checks without pg or postgres.
import { type InboxClient, PostgresInbox } from "flag-webhooks/postgres";

interface OwnTx {
  run(text: string): Promise<void>;
}
declare const own: InboxClient<OwnTx>;
export const inbox = new PostgresInbox(own, { scope: "consumer" });
export const inboxOnEvent = inbox.handle(async (event, tx) => tx.run(`-- ${event.id}`));
