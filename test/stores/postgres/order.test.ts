import fc from "fast-check";
import type { FlagUpdatedEvent, KnownWebhookEvent, WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, histories, propertyRuns } from "../../support/order.js";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Order in the Postgres inbox: the flag's positions are read (its row locked) and written in the
// handler's transaction, on a real server (test/support/postgres-server.ts).

const availability = postgresAvailability();
const SECRET = "whsec-postgres-order-test";
let database: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  if (!availability.available) return;
  database = await testDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 8 });
});
afterAll(async () => {
  await pool?.end();
  await database?.close();
});

let runs = 0;
async function receiver(fail: (event: WebhookEvent) => boolean = () => false) {
  const inbox = new PostgresInbox(pool, { scope: `order-${++runs}`, order: true });
  await inbox.migrate();
  const seen: WebhookEvent[] = [];
  const handle = webhookHandler({
    secret: SECRET,
    onError: () => {},
    onEvent: inbox.handle(async (event) => {
      if (fail(event)) throw new Error("the handler failed");
      seen.push(event);
    }),
  });
  const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
  return { seen, send, inbox };
}

describe.skipIf(!availability.available)("PostgresInbox with order", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once (1,000 runs of up to 4 events)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(4), async (history) => {
        await checkHistory(history, async (delivered) => {
          const { seen, send } = await receiver();
          const answers = await Promise.all(delivered.map(send));
          expect(answers.map((answer) => answer.status)).toEqual(delivered.map(() => 204));
          return seen;
        });
      }),
      { numRuns: propertyRuns(1000) },
    );
  }, 120_000);

  it("commits positions with the handler's transaction: a failed newer event leaves an older one fresh", async () => {
    const { seen, send } = await receiver((event) => event.id === "evt_2");
    const at = (id: string, createdAt: string) => createEvent("flag.updated", { id, createdAt });
    expect((await send(at("evt_2", "2026-11-21T09:02:00Z"))).status).toBe(500);
    const older = await send(at("evt_1", "2026-11-21T09:01:00Z"));
    expect([older.status, older.headers.get("webhook-stale")]).toEqual([204, null]);
    expect((await send(at("evt_0", "2026-11-21T09:00:00Z"))).headers.get("webhook-stale")).toBe("true");
    expect(seen.map((event) => event.id)).toEqual(["evt_1"]);
  });

  it("with handleStale, a wholly stale event runs the handler too, its changes given as stale", async () => {
    const inbox = new PostgresInbox(pool, { scope: `order-${++runs}`, order: { handleStale: true } });
    await inbox.migrate();
    const seen: FlagUpdatedEvent[] = [];
    const onEvent = inbox.handle(async (event) => void seen.push(event as FlagUpdatedEvent));
    const at = (id: string, createdAt: string) => createEvent("flag.updated", { id, createdAt });
    await onEvent(at("evt_2", "2026-11-21T09:02:00Z"));
    expect(await onEvent(at("evt_1", "2026-11-21T09:01:00Z"))).toBeUndefined();
    expect(seen.map((event) => [event.id, event.data.changes.length, event.staleChanges?.length])).toEqual([
      ["evt_2", 1, 0],
      ["evt_1", 0, 1],
    ]);
  });

  it("an event that takes no part in order (an unknown type) is handled once, and no flag's positions are kept for it", async () => {
    const scope = `order-${++runs}`;
    const inbox = new PostgresInbox(pool, { scope, order: true });
    await inbox.migrate();
    const seen: string[] = [];
    const onEvent = inbox.handle(async (event) => void seen.push(event.id));
    const unknown = {
      ...createEvent("flag.created", { id: "evt_unknown" }),
      type: "unknown",
      originalType: "flag.archived",
    };
    expect(await onEvent(unknown as WebhookEvent)).toBeUndefined();
    await onEvent(unknown as WebhookEvent);
    expect(seen).toEqual(["evt_unknown"]);
    const kept = await pool.query("select flag from flag_webhooks_inbox_positions where scope = $1", [scope]);
    expect(kept.rows).toEqual([]);
  });

  it("prune() deletes the scope's expired positions with its expired ids, and no other scope's", async () => {
    const scope = `order-${++runs}`;
    const expiring = new PostgresInbox(pool, { scope, order: true, retention: 1 });
    const kept = new PostgresInbox(pool, { scope: `${scope}-kept`, order: true });
    await expiring.migrate();
    const updated = (id: string) => createEvent("flag.updated", { id, createdAt: "2026-11-21T09:00:00Z" });
    await expiring.handle(() => {})(updated("evt_1"));
    await kept.handle(() => {})(updated("evt_1"));
    const positions = async () =>
      (
        await pool.query("select scope from flag_webhooks_inbox_positions where scope like $1 order by scope", [
          `${scope}%`,
        ])
      ).rows.map((row) => row.scope);
    expect(await positions()).toEqual([scope, `${scope}-kept`]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await expiring.prune()).toBe(1);
    expect(await positions()).toEqual([`${scope}-kept`]);
  });
});
