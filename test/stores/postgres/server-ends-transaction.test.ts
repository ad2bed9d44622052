import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase, testDatabase } from "../../support/postgres-database.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// A handler that awaits something slow while the inbox holds its transaction open, and Postgres
// ends that transaction meanwhile: the server's idle_in_transaction_session_timeout (common in
// managed Postgres), or an operator's pg_terminate_backend. Nothing commits, so no 2xx may leave;
// the process must not crash on the client's error; the sender's retry is then handled once.
// (On a pg Pool. postgres.js 3.4.9 itself crashes the process there, with no inbox involved: an
// uncaught TypeError from a write it had queued on the closed connection; see docs/postgres.md.)

const availability = postgresAvailability();
const SECRET = "whsec-server-ends-transaction";

let db: TestDatabase;
let admin: pg.Pool;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  if (!availability.available) return;
  db = await testDatabase();
  admin = new pg.Pool({ connectionString: db.url, max: 2 });
  await new PostgresInbox(admin, { scope: "setup" }).migrate();
  await admin.query("create table effects (event_id text not null)");
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  await admin?.end();
  await db?.close();
});

async function effects(id: string): Promise<number> {
  return Number((await admin.query("select count(*) from effects where event_id = $1", [id])).rows[0].count);
}

/** A pg Pool whose connections' idle transactions the server ends after `idle` ms, if given. */
function pool(idle?: number): pg.Pool {
  const made = new pg.Pool({
    connectionString: db.url,
    max: 4,
    ...(idle === undefined ? {} : { options: `-c idle_in_transaction_session_timeout=${idle}` }),
  });
  made.on("error", () => {});
  closers.push(() => made.end());
  return made;
}

/** An Express receiver of `inbox`, whose handler writes an effect row, then runs `meanwhile`. */
async function receiver(inbox: PostgresInbox<pg.Pool>, meanwhile: () => Promise<void>) {
  const errors: unknown[] = [];
  const app = express();
  app.post(
    "/webhooks",
    webhookMiddleware({
      secret: SECRET,
      onError: (error) => errors.push(error),
      onEvent: inbox.handle(async (event, tx) => {
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        await meanwhile();
      }),
    }),
  );
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
  const event = createEvent("flag.updated");
  const send = async () => {
    const d = await signedDelivery({ secret: SECRET, event });
    const response = await fetch(url, { method: "POST", body: d.body, headers: d.headers });
    return { status: response.status, retryAfter: response.headers.get("retry-after") };
  };
  return { event, send, errors };
}

describe.skipIf(!availability.available)(
  "PostgresInbox: Postgres ends the transaction while the handler awaits",
  () => {
    it("idle_in_transaction_session_timeout during the handler: 503, nothing committed, no crash; the retry commits once", async () => {
      let slow = true;
      // Something slow that is not a statement: statement_timeout does not see it.
      const { event, send, errors } = await receiver(new PostgresInbox(pool(300), { scope: "idle" }), async () => {
        if (slow) await sleep(800);
      });
      expect(await send()).toEqual({ status: 503, retryAfter: "10" });
      expect(await effects(event.id)).toBe(0);
      expect(errors.length).toBeGreaterThan(0);
      slow = false;
      expect((await send()).status).toBe(204);
      expect((await send()).status).toBe(204);
      expect(await effects(event.id)).toBe(1);
    });

    it("pg_terminate_backend of the handler's connection: 503, nothing committed, no crash; the retry commits once", async () => {
      let kill = true;
      const { event, send } = await receiver(new PostgresInbox(pool(), { scope: "terminated" }), async () => {
        if (!kill) return;
        kill = false;
        // An operator (or a failover) ends the backend that holds the inbox's transaction.
        await admin.query(
          "select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'",
        );
        await sleep(100);
      });
      expect(await send()).toEqual({ status: 503, retryAfter: "10" });
      expect(await effects(event.id)).toBe(0);
      expect((await send()).status).toBe(204);
      expect((await send()).status).toBe(204);
      expect(await effects(event.id)).toBe(1);
    });
  },
);
