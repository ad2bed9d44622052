import Database from "better-sqlite3";
import type { KnownWebhookEvent, WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, FlagMirror, inOrder, signedRequest } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// Flag keys a signed event may carry, as the inboxes keep their positions in a row per flag (on a
// real Postgres and a real SQLite file): a flag is any string the sender signs, so its row must be
// one every backend can hold, and two flags must never share one. Before, the Postgres inbox wrote
// the flag as it was: a NUL or a long key made every delivery of the flag 503 for ever, and a lone
// surrogate (allowed outside flag.updated, whose data the spec does not give) was written as U+FFFD,
// so a late flag.deleted of "\uD800" made the changes of the flag "\uFFFD" stale.

const availability = postgresAvailability();
const SECRET = "whsec-order-in-transaction-test";
let database: TestDatabase | undefined;
let pool: pg.Pool | undefined;
const file = new Database(databaseFile());
beforeAll(async () => {
  if (!availability.available) return;
  database = await testDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 4 });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await database?.close();
  file.close();
});

// A key of 3,000 CJK characters (9,000 bytes of UTF-8) that compression cannot shrink under a
// btree row's limit (about 2,700 bytes).
const LONG = Array.from({ length: 3000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join("");

let scopes = 0;
const backends = [
  { name: "PostgresInbox", available: availability.available },
  { name: "SqliteInbox", available: true },
] as const;

describe.each(backends)("$name with order: flag keys", ({ name, available }) => {
  async function receiver() {
    const options = { scope: `hostile-${++scopes}`, order: true as const };
    const inbox =
      name === "PostgresInbox" ? new PostgresInbox(pool as pg.Pool, options) : new SqliteInbox(file, options);
    await inbox.migrate();
    const seen: WebhookEvent[] = [];
    const handle = webhookHandler({
      secret: SECRET,
      onError: () => {},
      onEvent: inbox.handle(async (event) => void seen.push(event)),
    });
    const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
    return { seen, send };
  }

  it.skipIf(!available).each([
    ["with a NUL", "dark\u0000mode"],
    ["of 9,000 bytes", LONG],
    ["starting with #", `#${"0".repeat(64)}`],
  ])("orders a flag %s like any other: handled, and an older change then stale", async (_what, flag) => {
    const { send, seen } = await receiver();
    const at = (id: string, createdAt: string) => createEvent("flag.updated", { id, createdAt, data: { flag } });
    const newer = await send(at("evt_2", "2026-11-21T09:02:00Z"));
    expect(newer.status).toBe(204);
    const older = await send(at("evt_1", "2026-11-21T09:01:00Z"));
    expect([older.status, older.headers.get("webhook-stale")]).toEqual([204, "true"]);
    expect(seen.map((event) => event.id)).toEqual(["evt_2"]);
  });

  it.skipIf(!available)("keeps two flags apart that differ only in a lone surrogate: the in-order state", async () => {
    const { send, seen } = await receiver();
    const history = [
      createEvent("flag.updated", { id: "evt_1", createdAt: "2026-11-21T09:01:00Z", data: { flag: "\uFFFD" } }),
      createEvent("flag.deleted", { id: "evt_2", createdAt: "2026-11-21T09:02:00Z", data: { flag: "\uD800" } }),
      createEvent("flag.deleted", { id: "evt_3", createdAt: "2026-11-21T09:03:00Z", data: { flag: "\uDBFF" } }),
    ] as KnownWebhookEvent[];
    // Delivered newest first.
    for (const event of [...history].reverse()) expect((await send(event)).status).toBe(204);
    const expected = new FlagMirror();
    for (const event of inOrder(history)) expected.apply(event);
    const actual = new FlagMirror();
    for (const event of seen) actual.apply(event);
    expect(actual.snapshot()).toEqual(expected.snapshot());
    expect(seen.map((event) => event.id).sort()).toEqual(["evt_1", "evt_2", "evt_3"]);
  });
});
