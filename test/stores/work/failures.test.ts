import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// What a handler throws is recorded as the attempt's failure (its last error, the next attempt on
// the schedule), on a real Postgres and a real SQLite file, whatever it throws. A failure that
// cannot be recorded leaves the event `running` until its lease lapses, drain() rejects, and the
// retry comes after the lease instead of at the schedule's time, with no error to show for it.

const availability = postgresAvailability();
let database: TestDatabase | undefined;
let pool: pg.Pool | undefined;
beforeAll(async () => {
  if (!availability.available) return;
  database = await testDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 4 });
}, 60_000);
const files: Database.Database[] = [];
afterAll(async () => {
  for (const file of files.splice(0)) file.close();
  await pool?.end();
  await database?.close();
});

let scopes = 0;
function inboxOn(backend: "Postgres" | "SQLite"): PostgresInbox | SqliteInbox {
  const scope = `failures-${++scopes}`;
  if (backend === "Postgres") return new PostgresInbox(pool as pg.Pool, { scope });
  const file = new Database(databaseFile());
  files.push(file);
  return new SqliteInbox(file, { scope });
}

/** Runs one attempt of an event whose handler throws `thrown`; what drain() and the event then say. */
async function failOnce(backend: "Postgres" | "SQLite", thrown: () => unknown) {
  const inbox = inboxOn(backend);
  await inbox.migrate();
  await inbox.enqueue()(createEvent("flag.updated", { id: "evt_failing" }));
  const worker = inbox.work(
    () => {
      throw thrown();
    },
    { interval: false, retries: ["1h"], jitter: 0 },
  );
  try {
    return { drained: await worker.drain(), kept: await inbox.kept("evt_failing") };
  } finally {
    await worker.close();
  }
}

const recorded = { state: "pending", attempts: 1, lastError: expect.any(String) };

describe.each([
  { backend: "Postgres" as const, available: availability.available },
  { backend: "SQLite" as const, available: true },
])("$backend: a handler's failure is recorded whatever it throws", ({ backend, available }) => {
  it.runIf(available)("an Error, an undefined, a message cut in a surrogate pair", async () => {
    expect(await failOnce(backend, () => new Error("billing API answered 503"))).toEqual({
      drained: 1,
      kept: expect.objectContaining({ ...recorded, lastError: "billing API answered 503" }),
    });
    expect(await failOnce(backend, () => undefined)).toMatchObject({ drained: 1, kept: recorded });
    expect(await failOnce(backend, () => new Error(`${"x".repeat(998)}\u{1F600}`))).toMatchObject({
      drained: 1,
      kept: recorded,
    });
  });

  // String() of an object without a prototype throws a TypeError: the recorded message is its JSON.
  it.runIf(available)("an object without a prototype (Object.create(null))", async () => {
    expect(await failOnce(backend, () => Object.create(null))).toMatchObject({
      drained: 1,
      kept: { ...recorded, lastError: "{}" },
    });
  });
});

describe.runIf(availability.available)("Postgres: a message Postgres text cannot hold", () => {
  // Postgres text refuses U+0000 ("invalid byte sequence for encoding UTF8: 0x00"): the recorded
  // message writes it as the six characters \u0000.
  it("an error message with a NUL (a driver quoting binary data)", async () => {
    expect(await failOnce("Postgres", () => new Error("bad byte \u0000 in the row"))).toMatchObject({
      drained: 1,
      kept: { ...recorded, lastError: "bad byte \\u0000 in the row" },
    });
  });
});

describe("SQLite: a message that is not a string", () => {
  // better-sqlite3 cannot bind an object ("Too few parameter values were provided"): the recorded
  // message is the object's JSON, on every database.
  it("an Error whose message was set to an object", async () => {
    const thrown = () => Object.assign(new Error("x"), { message: { status: 503 } });
    expect(await failOnce("SQLite", thrown)).toMatchObject({
      drained: 1,
      kept: { ...recorded, lastError: '{"status":503}' },
    });
  });
});
