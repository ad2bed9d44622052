import {
  AggregationTemporality,
  type GaugeMetricData,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import Database from "better-sqlite3";
import { observeInbox } from "flag-webhooks/otel";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFile } from "../support/sqlite.js";

// observeInbox(): what a keep-then-work inbox holds (on a real SQLite file), as the SDK's gauges
// read back from its in-memory exporter at each collection.

const dbs: Database.Database[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
});

function meter() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    /** The gauges' values at a collection, by name, with their attributes. */
    async collect() {
      await reader.forceFlush();
      const found = new Map<string, { value: number; attributes: object }[]>();
      for (const resource of exporter.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          for (const metric of scope.metrics as GaugeMetricData[]) {
            found.set(
              metric.descriptor.name,
              metric.dataPoints.map((point) => ({ value: point.value, attributes: point.attributes })),
            );
          }
        }
      }
      exporter.reset();
      return found;
    },
  };
}

async function inboxOn(file: string, now: () => number) {
  const db = new Database(file);
  dbs.push(db);
  const inbox = new SqliteInbox(db, { scope: "billing", now });
  await inbox.migrate();
  return inbox;
}

describe("observeInbox", () => {
  it("reports pending, running and parked events and the oldest one's age, from the database at each collection", async () => {
    const received = Date.now() - 90_000;
    const inbox = await inboxOn(databaseFile(), () => received);
    const { meterProvider, collect } = meter();
    const attributes = { "flag_webhooks.inbox.scope": "billing" };
    let reads = 0;
    const counted = {
      counts: () => {
        reads++;
        return inbox.counts();
      },
    };
    const stop = observeInbox(counted, { meterProvider, attributes });
    const empty = await collect();
    expect([...empty.keys()].sort()).toEqual([
      "flag_webhooks.inbox.oldest_age",
      "flag_webhooks.inbox.parked",
      "flag_webhooks.inbox.pending",
      "flag_webhooks.inbox.running",
    ]);
    for (const points of empty.values()) expect(points).toEqual([{ value: 0, attributes }]);

    const keep = inbox.enqueue();
    for (const id of ["evt_a", "evt_b", "evt_c"]) await keep(createEvent("flag.updated", { id }));
    // evt_a fails its only attempt and is parked; the others wait.
    const poison = inbox.work(
      (event) => {
        if (event.id === "evt_a") throw new Error("poison");
        throw new Error("not now");
      },
      { interval: false, retries: [], concurrency: 1 },
    );
    const [first] = await inbox.pending({ limit: 1 });
    expect(first?.id).toBe("evt_a");
    await inbox.purge("evt_b");
    await inbox.purge("evt_c");
    await poison.drain();
    await poison.close();
    for (const id of ["evt_d", "evt_e"]) await keep(createEvent("flag.updated", { id }));
    const values = await collect();
    const value = (name: string) => values.get(`flag_webhooks.inbox.${name}`)?.[0]?.value;
    expect([value("pending"), value("running"), value("parked")]).toEqual([2, 0, 1]);
    // Received 90 s ago by the inbox's clock; a collection a moment later.
    expect(value("oldest_age")).toBeGreaterThanOrEqual(90);
    expect(value("oldest_age")).toBeLessThan(120);
    expect(values.get("flag_webhooks.inbox.pending")?.[0]?.attributes).toEqual(attributes);

    // Stopped: the database is not read again.
    stop();
    const before = reads;
    await collect();
    expect(reads).toBe(before);
  });

  it("a database that cannot answer: no points that collection, and the next one reports again", async () => {
    const file = databaseFile();
    const inbox = await inboxOn(file, Date.now);
    const { meterProvider, collect } = meter();
    observeInbox(inbox, { meterProvider });
    (dbs.pop() as Database.Database).close();
    expect([...(await collect()).values()].flat()).toEqual([]);
    const reopened = await inboxOn(file, Date.now);
    await reopened.enqueue()(createEvent("flag.updated", { id: "evt_later" }));
    const other = meter();
    observeInbox(reopened, { meterProvider: other.meterProvider });
    expect((await other.collect()).get("flag_webhooks.inbox.pending")?.[0]?.value).toBe(1);
  });

  it("refuses what is not an inbox", () => {
    expect(() => observeInbox({} as never)).toThrow(
      "flag-webhooks: observeInbox() takes a PostgresInbox or SqliteInbox",
    );
  });
});
