import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join, resolve } from "node:path";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import type { WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler as fetchHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { type LambdaProxyEventV2, webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import Koa from "koa";
import request from "supertest";
import { signatureOf } from "./deliveries.js";
import { close, listen } from "./http.js";

// One receiver per adapter (Express, Koa, fetch, Lambda) around an `onEvent`, for the tests that
// check what a store's handle() answers through each of them (the Postgres and SQLite inboxes):
// every store is then seen through the same receivers, and a delivery to any of them is one call.

const root = resolve(import.meta.dirname, "../..");

/** What a test reads from an adapter's answer. */
export interface Reply {
  status: number;
  headers: Record<string, string | undefined>;
  json: { error?: { code: string } } | undefined;
}
/** Delivers the event JSON `text`, signed, to a receiver; answers what it answered. */
export type Send = (text: string) => Promise<Reply>;
export type AdapterName = "Express" | "Koa" | "fetch" | "Lambda";
export const ADAPTERS: AdapterName[] = ["Express", "Koa", "fetch", "Lambda"];

/** How a receiver is made: its secret and `onEvent`, with `maxAge` and `onError` when given (onError quiet). */
export interface ReceiverOptions {
  secret: string;
  onEvent: (event: WebhookEvent, ...context: never[]) => unknown;
  maxAge?: string;
  onError?: (error: unknown) => void;
}

const servers: Server[] = [];
/** Closes every server `adapterReceiver()` started. */
export async function closeReceivers(): Promise<void> {
  await Promise.all(servers.splice(0).map((s) => close(s)));
}

/**
 * A receiver of the adapter (Express, Koa and fetch over real HTTP on a loopback port, Lambda
 * called with an API Gateway HTTP API event); returns how to deliver to it.
 */
export async function adapterReceiver(adapter: AdapterName, receiver: ReceiverOptions): Promise<Send> {
  const options = { onError: () => {}, ...receiver, onEvent: receiver.onEvent as never };
  const sign = (text: string) => signatureOf(receiver.secret, text);
  if (adapter === "Lambda") {
    const handler = lambdaHandler(options);
    const template = JSON.parse(
      readFileSync(join(root, "test/fixtures/lambda/http-api-v2.json"), "utf8"),
    ) as LambdaProxyEventV2;
    return async (text) => {
      const result = await handler(
        {
          ...template,
          headers: { "content-type": "application/json", "service-signature": await sign(text) },
          body: text,
          isBase64Encoded: false,
        },
        { awsRequestId: randomUUID(), getRemainingTimeInMillis: () => 3000 },
      );
      const headers = Object.fromEntries(
        Object.entries(result.headers ?? {}).map(([name, value]) => [name.toLowerCase(), String(value)]),
      );
      return { status: result.statusCode, headers, json: result.body ? JSON.parse(result.body) : undefined };
    };
  }
  let http: Server;
  if (adapter === "Express") {
    const app = express();
    app.post("/webhooks", expressMiddleware(options));
    http = createServer(app);
  } else if (adapter === "Koa") {
    const app = new Koa();
    app.use(koaMiddleware(options));
    http = createServer(app.callback());
  } else {
    http = createAdaptorServer({ fetch: fetchHandler(options) }) as Server;
  }
  servers.push(await listen(http));
  return async (text) => {
    const answer = await request(http)
      .post("/webhooks")
      .set("content-type", "application/json")
      .set("service-signature", await sign(text))
      .send(text);
    return {
      status: answer.status,
      headers: answer.headers as Record<string, string>,
      json: answer.text ? JSON.parse(answer.text) : undefined,
    };
  };
}
