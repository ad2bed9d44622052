import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIRROR_ROWS, MIRROR_TABLE } from "../../support/order-mirror.js";
import { raceTwoReceivers } from "../../support/order-processes.js";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Two receiver processes on one PostgreSQL, the same shuffled stream sent to both at once: the
// flag's positions are read (their row locked) and written in each handler's transaction, so the
// mirror the handlers write ends as the history applied in order, 0 wrong fields.

const availability = postgresAvailability();
let database: TestDatabase | undefined;
let admin: pg.Pool | undefined;
beforeAll(async () => {
  if (!availability.available) return;
  database = await testDatabase();
  admin = new pg.Pool({ connectionString: database.url, max: 2 });
  await new PostgresInbox(admin, { scope: "race", order: true }).migrate();
  await admin.query(MIRROR_TABLE);
}, 60_000);
afterAll(async () => {
  await admin?.end();
  await database?.close();
});

describe.skipIf(!availability.available)("PostgresInbox with order, two processes on one database", () => {
  it("ends with the in-order state: 0 wrong fields", async () => {
    const db = admin as pg.Pool;
    const result = await raceTwoReceivers(
      { DATABASE_URL: (database as TestDatabase).url },
      "race",
      async () => (await db.query(MIRROR_ROWS, ["race"])).rows,
    );
    expect(result.fields).toBeGreaterThan(0);
    expect(result.wrong).toBe(0);
    expect(result.mirror).toEqual(result.expected);
  }, 120_000);
});
