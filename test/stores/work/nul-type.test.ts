import Database from "better-sqlite3";
import { webhookHandler } from "flag-webhooks/fetch";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { signatureOf } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// An event of a type this version does not know passes as `unknown`, its type as sent kept in
// the row's `type` column for the listings. A type the sender signs may hold a NUL (as the JSON
// escape `\u0000`), which a Postgres text column cannot hold: such an event must still be kept
// (202) and worked once, on Postgres as on SQLite, not refused 503 on every retry.

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
const SECRET = "whsec-nul-type";
const BODY =
  '{"id":"evt_nul_type","type":"audit.\\u0000x","createdAt":"2026-11-21T09:00:00Z","environment":"production","data":{"flag":"f"}}';

type Inbox = PostgresInbox | SqliteInbox;

async function keepAndWork(inbox: Inbox) {
  await inbox.migrate();
  const handle = webhookHandler({ secret: SECRET, onEvent: inbox.enqueue() });
  const signature = await signatureOf(SECRET, BODY);
  const deliver = () =>
    handle(
      new Request("http://receiver/", {
        method: "POST",
        headers: { "content-type": "application/json", "service-signature": signature },
        body: BODY,
      }),
    );
  const statuses = [(await deliver()).status, (await deliver()).status];
  const seen: string[] = [];
  const worker = inbox.work((event) => void seen.push((event as { originalType?: string }).originalType ?? ""), {
    interval: false,
  });
  await worker.drain();
  await worker.close();
  return { statuses, seen, kept: await inbox.kept("evt_nul_type") };
}

describe("keep then work: an unknown type with a NUL", () => {
  const db = new Database(databaseFile());
  afterAll(() => db.close());

  it.skipIf(!availability.available)(
    "Postgres: kept (202, then a duplicate 204) and worked once with its type as sent",
    async () => {
      const { statuses, seen, kept } = await keepAndWork(new PostgresInbox(database.pool(2), { scope: "nul-type" }));
      expect(statuses).toEqual([202, 204]);
      expect(seen).toEqual(["audit.\u0000x"]);
      expect(kept).toMatchObject({ state: "done", type: "audit.\uFFFDx" });
    },
  );

  it("SQLite: the same, and the type listed the same way", async () => {
    const { statuses, seen, kept } = await keepAndWork(new SqliteInbox(db, { scope: "nul-type" }));
    expect(statuses).toEqual([202, 204]);
    expect(seen).toEqual(["audit.\u0000x"]);
    expect(kept).toMatchObject({ state: "done", type: "audit.\uFFFDx" });
  });
});
