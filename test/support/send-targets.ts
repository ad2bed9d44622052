import { createServer, type IncomingMessage, type Server, STATUS_CODES } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { createApp } from "../../examples/express.js";
import { close, listen } from "./http.js";

// The receivers `flag-webhooks send` is tried against, by the in-process command's tests
// (test/cli/send.test.ts) and by the installed binary's (test/cli/installed.test.ts): one set, so
// that both send to the same receivers.

/** What the recorder answers: a status, its reason phrase (the standard one unless given), a body. */
export interface RecorderAnswer {
  status: number;
  body: string;
  headers?: Record<string, string>;
  reason?: string;
}

/** Receivers on loopback, and what the recorder saw. */
export interface SendTargets {
  /** The Express example (examples/express.ts) with the secret given. */
  receiver: Server;
  /** The Express middleware with memory dedupe: answers 200 `{ received }`, and a copy of an event 204 with Webhook-Duplicate. */
  deduping: Server;
  /** The ids of the events whose handler the deduping receiver ran, in order. */
  handled: string[];
  /** Keeps the last request's bytes and headers, and answers with `answer`. */
  recorder: Server;
  /** Never answers. */
  silent: Server;
  /** A port nothing listens on. */
  closedPort: number;
  /** The last request the recorder got. */
  recorded: { body: Buffer; headers: IncomingMessage["headers"] } | undefined;
  /** What the recorder answers from now on: 202 "recorded" (text/plain) until a test sets it. */
  answer: RecorderAnswer;
  close(): Promise<void>;
}

/** Starts the receivers `flag-webhooks send` is tried against (the example's secret: `secret`). */
export async function startSendTargets(secret: string): Promise<SendTargets> {
  const closed = await listen(createServer());
  const closedPort = (closed.address() as AddressInfo).port;
  await close(closed);
  const targets: SendTargets = {
    receiver: await listen(createApp(secret).listen(0, "127.0.0.1")),
    deduping: await listen(dedupingApp(secret, (id) => targets.handled.push(id)).listen(0, "127.0.0.1")),
    handled: [],
    recorder: await listen(
      createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (chunk: Buffer) => chunks.push(chunk));
        req.on("end", () => {
          targets.recorded = { body: Buffer.concat(chunks), headers: req.headers };
          const { status, reason, headers, body } = targets.answer;
          res
            .writeHead(status, reason ?? (STATUS_CODES[status] as string), { "content-type": "text/plain", ...headers })
            .end(body);
        });
      }),
    ),
    silent: await listen(createServer(() => undefined)),
    closedPort,
    recorded: undefined,
    answer: { status: 202, body: "recorded" },
    close: () =>
      Promise.all([
        close(targets.receiver),
        close(targets.deduping),
        close(targets.recorder),
        close(targets.silent),
      ]).then(() => {}),
  };
  return targets;
}

/** An Express app whose webhook route dedupes by event id in memory, telling `handled` of each event it runs. */
function dedupingApp(secret: string, handled: (id: string) => void): express.Express {
  const app = express();
  const dedupe = { store: new MemoryDedupeStore(), ttl: "10m" };
  app.post("/webhooks", webhookMiddleware({ secret, dedupe }), (req, res) => {
    const id = req.webhookEvent?.id ?? "";
    handled(id);
    res.json({ received: id });
  });
  return app;
}
