import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join, resolve } from "node:path";
import { createAdaptorServer } from "@hono/node-server";
import { build } from "esbuild";
import express from "express";
import type { DedupeStore, WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler as fetchHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { type LambdaProxyEventV2, webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import Koa from "koa";
import request from "supertest";
import { entries, specifier } from "../../entries.js";
import { killWatched, startWatched, type Watched } from "./crash.js";
import { signatureOf } from "./deliveries.js";
import { freePort } from "./free-port.js";
import { close, listen } from "./http.js";

// Shared by the SQLite inbox's tests (test/stores/sqlite/): files in the clone, signed
// deliveries, a receiver of each adapter around an `onEvent`, and receiver processes (the fixture
// test/fixtures/sqlite-receiver.ts) on Node 20, 22, 24 or Bun, whose inboxes serve the store
// contract over HTTP.

const root = resolve(import.meta.dirname, "../..");
export const SQLITE_SECRET = "whsec-sqlite-inbox-test";

/** A new database path in a folder of its own under .test-results/ (inside the clone). */
export function databaseFile(name = "inbox.db"): string {
  const dir = join(root, ".test-results/sqlite", randomUUID());
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}

/** A flag.updated event body with this id, dated now. */
export function eventBody(id: string): string {
  return JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "prod",
    data: { flag: "new-checkout", changes: [], actor: { type: "user", email: "dana@example.com" } },
  });
}
export const signBody = (text: string, secret = SQLITE_SECRET): Promise<string> => signatureOf(secret, text);

export interface Reply {
  status: number;
  headers: Record<string, string | undefined>;
  json: { error?: { code: string } } | undefined;
}
export type Send = (text: string) => Promise<Reply>;
export type AdapterName = "Express" | "Koa" | "fetch" | "Lambda";
export const ADAPTERS: AdapterName[] = ["Express", "Koa", "fetch", "Lambda"];

const servers: Server[] = [];
/** Closes every server `receiver()` started. */
export async function closeReceivers(): Promise<void> {
  await Promise.all(servers.splice(0).map((s) => close(s)));
}

/** A receiver of the adapter, running `onEvent` (with `maxAge` when given); returns how to deliver to it. */
export async function receiver(
  adapter: AdapterName,
  onEvent: (event: WebhookEvent, ...context: never[]) => unknown,
  extra: { maxAge?: string; onError?: (error: unknown) => void } = {},
): Promise<Send> {
  const options = { secret: SQLITE_SECRET, onEvent: onEvent as never, onError: () => {}, ...extra };
  if (adapter === "Lambda") {
    const handler = lambdaHandler(options);
    const template = JSON.parse(
      readFileSync(join(root, "test/fixtures/lambda/http-api-v2.json"), "utf8"),
    ) as LambdaProxyEventV2;
    return async (text) => {
      const result = await handler(
        {
          ...template,
          headers: { "content-type": "application/json", "service-signature": await signBody(text) },
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
      .set("service-signature", await signBody(text))
      .send(text);
    return {
      status: answer.status,
      headers: answer.headers as Record<string, string>,
      json: answer.text ? JSON.parse(answer.text) : undefined,
    };
  };
}

/** The runtimes a receiver process runs on: this Node (20), Node 22 and 24 (tools/node-versions), Bun. */
export const RUNTIMES = {
  node20: process.execPath,
  node22: join(root, "tools/node-versions/node_modules/node22/bin/node"),
  node24: join(root, "tools/node-versions/node_modules/node24/bin/node"),
  bun: join(root, "node_modules/.bin/bun"),
} as const;
export type Runtime = keyof typeof RUNTIMES;

let bundled: Promise<string> | undefined;
/**
 * The receiver fixture bundled once (esbuild: ESM for Node and Bun, `flag-webhooks/*` from src/,
 * the drivers left to each runtime), so that it starts in tens of ms, and runs on Node 22 and Bun
 * without a TypeScript loader.
 */
export function receiverBundle(): Promise<string> {
  bundled ??= (async () => {
    const outfile = join(root, ".test-results/sqlite-receiver.mjs");
    const sources = new Map(entries.map((entry) => [specifier(entry), resolve(root, entry.source)]));
    await build({
      entryPoints: [join(root, "test/fixtures/sqlite-receiver.ts")],
      bundle: true,
      platform: "node",
      format: "esm",
      outfile,
      external: ["better-sqlite3", "@libsql/client", "bun:sqlite", "node:sqlite"],
      plugins: [
        {
          name: "flag-webhooks-from-source",
          setup(b) {
            b.onResolve({ filter: /^flag-webhooks(\/|$)/ }, (args) => ({ path: sources.get(args.path) as string }));
          },
        },
      ],
      logLevel: "warning",
    });
    return outfile;
  })();
  return bundled;
}

/** A receiver process (test/fixtures/sqlite-receiver.ts) and what it printed. */
export interface ReceiverProcess extends Watched {
  name: string;
  port: number;
}

/** Starts a receiver process on `runtime` with the fixture's environment (DRIVER, FILE, …). */
export async function startReceiver(
  runtime: Runtime,
  env: Record<string, string>,
  port?: number,
): Promise<ReceiverProcess> {
  const bundle = await receiverBundle();
  const chosen = port ?? (await freePort());
  const started = await startWatched(`the ${runtime} receiver`, RUNTIMES[runtime], [bundle], {
    cwd: root,
    env: { ...process.env, WEBHOOK_SECRET: SQLITE_SECRET, PORT: String(chosen), ...env },
  });
  return Object.assign(started, { name: env.NAME ?? "receiver", port: chosen });
}

/** Stops a receiver process, at once. */
export const stopReceiver = (receiver: ReceiverProcess): Promise<void> => killWatched(receiver);

/** One of a receiver process's inboxes, as a DedupeStore over HTTP (POST /store). */
export function remoteStore(receiver: ReceiverProcess, instance: "store" | "peer" | "other"): DedupeStore {
  const call = async (op: string, id: string, ms = 0) => {
    const answer = await fetch(`http://127.0.0.1:${receiver.port}/store`, {
      method: "POST",
      body: JSON.stringify({ instance, op, id, ms }),
    });
    const json = (await answer.json()) as { result?: unknown; error?: string };
    if (!answer.ok) throw new Error(json.error);
    return json.result;
  };
  return {
    claim: async (id, lease) => (await call("claim", id, lease)) as never,
    complete: async (id, ttl) => void (await call("complete", id, ttl)),
    release: async (id) => void (await call("release", id)),
  };
}
