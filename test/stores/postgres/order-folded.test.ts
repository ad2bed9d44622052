import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { KnownWebhookEvent, WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CountingClient, countStatements } from "../../support/postgres-counting.js";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// With `order`, the Postgres inbox reads a flag's positions in the statement that claims the event
// id (or locks a kept event's row) and writes them in the check before COMMIT: no round trip of
// their own. The read shares a statement whose snapshot is taken before it waits for the flag's
// row, so what it returns must be the row as the delivery it waited for committed it.

const availability = postgresAvailability();
const SECRET = "whsec-postgres-order-folded-test";
let database: TestDatabase;
let admin: pg.Pool;
const ends: (() => Promise<unknown>)[] = [];
beforeAll(async () => {
  if (!availability.available) return;
  database = await testDatabase();
  admin = new pg.Pool({ connectionString: database.url, max: 2 });
  await new PostgresInbox(admin, { scope: "setup", order: true }).migrate();
}, 60_000);
afterAll(async () => {
  await Promise.all(ends.map((end) => end()));
  await admin?.end();
  await database?.close();
});

const clients = {
  pg: () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 4, Client: CountingClient });
    ends.push(() => pool.end());
    return pool;
  },
  "postgres.js": () => {
    const sql = postgres(database.url, { max: 4, onnotice: () => {} });
    ends.push(() => sql.end());
    return sql;
  },
};

const update = (id: string, createdAt: string, to: number) =>
  createEvent("flag.updated", {
    id,
    createdAt,
    data: { flag: "checkout", changes: [{ path: "rollout.percent", from: null, to }] },
  }) as KnownWebhookEvent;

/** Resolves once a backend of the test's database waits for a lock (only the older delivery's claim can). */
async function waitingForFlagRow(): Promise<void> {
  for (;;) {
    const { rows } = await admin.query(
      "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
    );
    if (rows.length > 0) return;
    await sleep(10);
  }
}

describe.skipIf(!availability.available)("PostgresInbox with order: the positions in the claim and the COMMIT", () => {
  for (const [name, make] of Object.entries(clients)) {
    for (const existing of [false, true]) {
      it(`${name}: a delivery that waited for the flag's row, ${existing ? "updated" : "inserted"} by the one it waited for, judges by what that one committed`, async () => {
        const inbox = new PostgresInbox(make(), {
          scope: `wait-${randomUUID().slice(0, 8)}`,
          order: true,
          lockTimeout: "20s",
          timeout: "30s",
        });
        let open: () => void = () => {};
        const gate = new Promise<void>((resolve) => {
          open = resolve;
        });
        let reached: () => void = () => {};
        const atGate = new Promise<void>((resolve) => {
          reached = resolve;
        });
        const seen: string[] = [];
        const handle = webhookHandler({
          secret: SECRET,
          onEvent: inbox.handle(async (event: WebhookEvent) => {
            if (event.id === "evt_new") {
              reached();
              await gate;
            }
            seen.push(event.id);
          }),
        });
        const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
        if (existing) expect((await send(update("evt_first", "2026-11-21T09:00:00Z", 5))).status).toBe(204);
        // The newer delivery holds the flag's row while its handler waits at the gate…
        const newer = send(update("evt_new", "2026-11-21T09:02:00Z", 50));
        await atGate;
        // …the older one's claim waits for that row; then the newer one commits its positions.
        const older = send(update("evt_old", "2026-11-21T09:01:00Z", 10));
        await waitingForFlagRow();
        open();
        expect((await newer).status).toBe(204);
        const late = await older;
        expect([late.status, late.headers.get("webhook-stale")]).toEqual([204, "true"]);
        expect(seen).toEqual([...(existing ? ["evt_first"] : []), "evt_new"]);
      });
    }
  }

  it("pg: an ordered delivery costs the round trips of one without order (2 besides the handler's)", async () => {
    const pool = clients.pg();
    const counts: number[] = [];
    for (const order of [false, true]) {
      const inbox = new PostgresInbox(pool, { scope: `trips-${randomUUID().slice(0, 8)}`, order });
      const onEvent = inbox.handle(() => {});
      await onEvent(update("evt_warm", "2026-11-21T09:00:00Z", 1));
      counts.push(await countStatements(() => onEvent(update("evt_next", "2026-11-21T09:01:00Z", 2))));
    }
    expect(counts).toEqual([2, 2]);
  });

  it("pg: a worker's attempt at an ordered event costs the round trips of one without order", async () => {
    const pool = clients.pg();
    const counts: number[] = [];
    for (const order of [false, true]) {
      const inbox = new PostgresInbox(pool, { scope: `trips-${randomUUID().slice(0, 8)}`, order });
      const worker = inbox.work(() => {}, { interval: false });
      ends.push(() => worker.close());
      for (const [i, event] of [
        update("evt_a", "2026-11-21T09:00:00Z", 1),
        update("evt_b", "2026-11-21T09:01:00Z", 2),
      ].entries()) {
        await inbox.enqueue()(event);
        const trips = await countStatements(() => worker.drain());
        if (i === 1) counts.push(trips);
      }
    }
    expect(counts[1]).toBe(counts[0]);
  });
});
