import type { Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { createAdaptorServer } from "@hono/node-server";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import Database from "better-sqlite3";
import { webhookHandler } from "flag-webhooks/fetch";
import { openTelemetry } from "flag-webhooks/otel";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { close, listen, post } from "../support/http.js";
import { type Sdk, startSdk } from "../support/otel.js";
import { commitCounting, databaseFile } from "../support/sqlite.js";

// Deliveries kept by one COMMIT (group commit) each keep the trace context of their own
// delivery, so that each event's attempts join its own trace: the rows of one batch are written
// by one statement, and must not share (or swap) a context. With the real OpenTelemetry SDK, over
// HTTP, on a SQLite file whose write lock another connection holds while the deliveries arrive.

const SECRET = "otel-batched-secret";

let sdk: Sdk;
let server: Server | undefined;
beforeAll(() => {
  sdk = startSdk();
});
afterAll(async () => {
  await close(server);
  await sdk?.shutdown();
});

describe("group commit and the trace context of each kept event", () => {
  it("each row of a batch keeps the context of the receive span of its own delivery", async () => {
    sdk.spans.reset();
    const file = databaseFile();
    const db = new Database(file);
    db.pragma("journal_mode = wal");
    const other = new Database(file);
    const { connection, commits } = commitCounting(db);
    const inbox = new SqliteInbox(connection, { scope: "otel-batch" });
    await inbox.migrate();
    const before = commits();
    const telemetry = openTelemetry({ meterProvider: sdk.meterProvider });
    server = await listen(
      createAdaptorServer({
        fetch: webhookHandler({ secret: SECRET, telemetry, onEvent: inbox.enqueue({ telemetry }) }),
      }) as Server,
    );
    const ids = Array.from({ length: 8 }, (_, i) => `evt_batched_${i}`);
    // The first delivery's COMMIT waits for the lock; the others arrive meanwhile and share the next.
    other.exec("begin immediate");
    const answers = ids.map(async (id) => post(server as Server, await delivery(SECRET, { id })));
    await sleep(300);
    other.exec("rollback");
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual(ids.map(() => 202));
    // They did share COMMITs: otherwise this test would say nothing of a batch's rows.
    expect(commits() - before).toBeLessThan(ids.length);

    const receives = await sdk.ended("flag-webhooks.receive", ids.length);
    const traceOf = (id: string) =>
      (receives.find((span) => span.attributes["flag_webhooks.event.id"] === id) as ReadableSpan).spanContext();
    const rows = db.prepare("select id, trace_context from flag_webhooks_inbox where scope = 'otel-batch'").all() as {
      id: string;
      trace_context: string;
    }[];
    expect(rows).toHaveLength(ids.length);
    for (const row of rows) {
      const { traceId, spanId } = traceOf(row.id);
      expect(JSON.parse(row.trace_context).traceparent).toBe(`00-${traceId}-${spanId}-01`);
    }
    // Eight deliveries, eight traces.
    expect(new Set(rows.map((row) => row.trace_context)).size).toBe(ids.length);
    other.close();
    db.close();
  }, 60_000);
});
