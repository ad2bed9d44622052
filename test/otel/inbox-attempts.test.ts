import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { openTelemetry } from "flag-webhooks/otel";
import { type InboxWorker, PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { close, listen, post } from "../support/http.js";
import { fakeClock } from "../support/keep-then-work.js";
import { type Sdk, startSdk } from "../support/otel.js";
import { effectsDatabase } from "../support/postgres-effects.js";
import { postgresAvailability } from "../support/postgres-server.js";
import { databaseFile } from "../support/sqlite.js";

// Keep-then-work with the real OpenTelemetry SDK (in-memory exporters), on a SQLite file and a
// real PostgreSQL: each attempt of a kept event is a span in the trace of the HTTP delivery that
// brought it, a child of its receive span, even hours later and from another worker; the
// attempts are counted by outcome. The trace context lives in a column migrate() adds to a table
// made before it existed.

const SECRET = "otel-keep-secret";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);

/** An inbox of either database, and how to reach its table around the inbox. */
interface Subject {
  inbox(clock: () => number): SqliteInbox | PostgresInbox<never>;
  /** Runs SQL on the inbox's table (`$1` parameters), as an old version or a dead worker left it. */
  exec(sql: string, params?: unknown[]): Promise<void>;
}

const subjects: [string, () => Promise<Subject>, string | undefined][] = [
  [
    "SQLite (better-sqlite3)",
    async () => {
      const db = new Database(databaseFile());
      return {
        inbox: (now) => new SqliteInbox(db, { scope: "otel", now }),
        exec: async (sql, params = []) => void db.prepare(sql.replace(/\$\d/g, "?")).run(...params),
      };
    },
    undefined,
  ],
  [
    "Postgres (pg)",
    async () => {
      await database.admin.query("drop table if exists flag_webhooks_inbox");
      const pool = database.pool(4);
      return {
        inbox: (now) => new PostgresInbox(pool, { scope: "otel", now }) as PostgresInbox<never>,
        exec: async (sql, params = []) => void (await database.admin.query(sql, params)),
      };
    },
    availability.available ? undefined : availability.reason,
  ],
];

let sdk: Sdk;
beforeAll(() => {
  sdk = startSdk();
});
afterAll(async () => {
  await sdk?.shutdown();
});

describe.each(subjects)("kept attempts as spans and a counter: %s", (_name, setup, skip) => {
  let server: Server | undefined;
  let worker: InboxWorker | undefined;
  afterAll(async () => {
    await worker?.close();
    await close(server);
  });

  it.skipIf(skip !== undefined)(
    "each attempt is a child span of its delivery's receive span, and the attempts are counted by outcome",
    async () => {
      sdk.spans.reset();
      await sdk.points();
      const subject = await setup();
      const clock = fakeClock();
      // A table migrate() made before the trace context had a column: migrate() adds it, silently.
      await subject.inbox(clock.now).migrate();
      await subject.exec("alter table flag_webhooks_inbox drop column trace_context");
      const inbox = subject.inbox(clock.now);
      await inbox.migrate();

      const telemetry = openTelemetry({ meterProvider: sdk.meterProvider });
      server = await listen(
        createAdaptorServer({
          fetch: webhookHandler({ secret: SECRET, telemetry, onEvent: inbox.enqueue({ telemetry }) }),
        }) as Server,
      );
      const runs: string[] = [];
      const fn = async (event: WebhookEvent, _tx: unknown, { attempt }: { attempt: number }) => {
        runs.push(`${event.id}#${attempt}`);
        await trace.getTracer("app").startActiveSpan("app.attempt", async (span) => span.end());
        if (event.id === "evt_poison" || attempt < 3) throw new Error(`attempt ${attempt} fails on purpose`);
      };
      worker = inbox.work(fn, { telemetry, interval: false, retries: ["1s", "1s"], jitter: 0 });

      for (const id of ["evt_flaky", "evt_poison"]) {
        const sent = await delivery(SECRET, { id });
        expect((await post(server, sent)).status).toBe(202);
      }
      for (let round = 0; round < 3; round++) {
        await worker.drain();
        clock.advance(1000);
      }
      expect(runs.sort()).toEqual([
        "evt_flaky#1",
        "evt_flaky#2",
        "evt_flaky#3",
        "evt_poison#1",
        "evt_poison#2",
        "evt_poison#3",
      ]);

      const receives = await sdk.ended("flag-webhooks.receive", 2);
      const attempts = await sdk.ended("flag-webhooks.process", 6);
      for (const id of ["evt_flaky", "evt_poison"]) {
        const receive = receives.find((span) => span.attributes["flag_webhooks.event.id"] === id) as ReadableSpan;
        const mine = attempts
          .filter((span) => span.attributes["flag_webhooks.event.id"] === id)
          .sort(
            (a, b) =>
              Number(a.attributes["flag_webhooks.job.attempt"]) - Number(b.attributes["flag_webhooks.job.attempt"]),
          );
        expect(mine.map((span) => span.attributes["flag_webhooks.job.attempt"])).toEqual([1, 2, 3]);
        for (const span of mine) {
          expect(span.kind).toBe(SpanKind.CONSUMER);
          expect(span.spanContext().traceId).toBe(receive.spanContext().traceId);
          expect(span.parentSpanContext?.spanId).toBe(receive.spanContext().spanId);
          expect(span.attributes["flag_webhooks.event.type"]).toBe("flag.updated");
        }
        const last = id === "evt_flaky" ? "done" : "parked";
        expect(mine.map((span) => span.attributes["flag_webhooks.outcome"])).toEqual(["failed", "failed", last]);
        expect(mine.map((span) => span.status.code)).toEqual([
          SpanStatusCode.ERROR,
          SpanStatusCode.ERROR,
          last === "done" ? SpanStatusCode.UNSET : SpanStatusCode.ERROR,
        ]);
        expect(mine[0]?.events.map((event) => event.attributes?.["exception.message"])).toEqual([
          "attempt 1 fails on purpose",
        ]);
      }
      // The handler's own spans nest under the attempt that ran them.
      const own = await sdk.ended("app.attempt", 6);
      expect(own.map((span) => span.parentSpanContext?.spanId).sort()).toEqual(
        attempts.map((span) => span.spanContext().spanId).sort(),
      );

      // An attempt whose worker died with it (its lease lapsed, none left) is parked by the next
      // take: a span of its trace too, and counted.
      const lapsed = await delivery(SECRET, { id: "evt_lapsed" });
      expect((await post(server, lapsed)).status).toBe(202);
      await subject.exec(
        "update flag_webhooks_inbox set state = 'running', attempts = 3, lease_until = $1 where id = 'evt_lapsed'",
        [clock.now() - 1],
      );
      await worker.drain();
      const [dead] = await sdk.ended(
        (span) => span.attributes["flag_webhooks.event.id"] === "evt_lapsed" && span.name === "flag-webhooks.process",
      );
      const [deadReceive] = await sdk.ended(
        (span) => span.attributes["flag_webhooks.event.id"] === "evt_lapsed" && span.name === "flag-webhooks.receive",
      );
      expect(dead?.parentSpanContext?.spanId).toBe(deadReceive?.spanContext().spanId);
      expect([dead?.attributes["flag_webhooks.outcome"], dead?.status.code]).toEqual(["parked", SpanStatusCode.ERROR]);
      expect((await inbox.kept("evt_lapsed"))?.state).toBe("parked");

      const counted = (await sdk.points()).get("flag_webhooks.inbox.attempts") ?? [];
      const byOutcome = Object.fromEntries(
        counted.map((point) => [point.attributes["flag_webhooks.outcome"], point.value]),
      );
      expect(byOutcome).toEqual({ failed: 4, done: 1, parked: 2 });
      for (const point of counted) expect(point.attributes["flag_webhooks.event.type"]).toBe("flag.updated");
    },
    60_000,
  );
});
