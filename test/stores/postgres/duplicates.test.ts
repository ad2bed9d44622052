import { randomUUID } from "node:crypto";
import type { WebhookEvent } from "flag-webhooks";
import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Copies of one event id on PostgresInbox.handle(): a copy of an id already handled is answered
// from what is committed, without waiting on the row's lock (copies replayed at speed would
// otherwise each wait for the one before); a copy of an id still being handled waits for it, and
// answers 409 past lockTimeout, as before.

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
const { pool, effects } = database;
const sqls: postgres.Sql[] = [];
const pools: pg.Pool[] = [];
afterAll(async () => {
  await Promise.all([...sqls.map((sql) => sql.end()), ...pools.map((made) => made.end())]);
});

const DUPLICATE = { status: 204, headers: { "webhook-duplicate": "true" } };
const event = (id: string) => ({ id, type: "flag.updated" }) as WebhookEvent;

/** The statements one client sent, in order: pg sends one at a time, so each is one round trip. */
type Sent = string[];

/**
 * An inbox of `scope` on each client, a handler that writes one effect row through tx, and the
 * statements that client sends (pg: its clients' queries; postgres.js: its debug hook).
 */
const clients = {
  "pg Pool": (scope: string, sent: Sent = []) => {
    class Recording extends pg.Client {
      override query(...args: unknown[]): never {
        sent.push(String((args[0] as { text?: unknown }).text ?? args[0]));
        return (super.query as (...a: unknown[]) => never)(...args);
      }
    }
    const recorded = new pg.Pool({ connectionString: database.url, max: 4, Client: Recording });
    pools.push(recorded);
    return new PostgresInbox(recorded, { scope, lockTimeout: 100 }).handle(async (e, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [e.id]);
    });
  },
  "postgres.js": (scope: string, sent: Sent = []) => {
    const sql = postgres(database.url, {
      max: 4,
      onnotice: () => {},
      debug: (_connection, query) => void sent.push(query),
    });
    sqls.push(sql);
    return new PostgresInbox(sql, { scope, lockTimeout: 100 }).handle(async (e, tx) => {
      await tx`insert into effects (event_id) values (${e.id})`;
    });
  },
};

/** Holds the row lock of `id` in `scope` in a transaction of its own, as a copy inside its claim does, until `free()`. */
async function lockRow(scope: string, id: string) {
  const client = await database.admin.connect();
  await client.query("begin");
  await client.query("select 1 from flag_webhooks_inbox where scope = $1 and id = $2 for update", [scope, id]);
  return {
    free: async () => {
      await client.query("rollback");
      client.release();
    },
  };
}

describe.skipIf(!availability.available)("PostgresInbox.handle(): copies of one id", () => {
  for (const [name, make] of Object.entries(clients)) {
    describe(name, () => {
      it("a copy of a handled id is a duplicate even while its row is locked: answered from what is committed", async () => {
        const onEvent = make("copies");
        const id = `evt_${randomUUID()}`;
        expect(await onEvent(event(id))).toBeUndefined();
        const lock = await lockRow("copies", id);
        try {
          expect(await onEvent(event(id))).toEqual(DUPLICATE);
        } finally {
          await lock.free();
        }
        expect(await effects(id)).toBe(1);
      });

      it("a copy of a handled id is answered after one statement, outside any transaction: no BEGIN, no ROLLBACK", async () => {
        const sent: Sent = [];
        const onEvent = make("one-read", sent);
        const id = `evt_${randomUUID()}`;
        expect(await onEvent(event(id))).toBeUndefined();
        sent.length = 0;
        expect(await onEvent(event(id))).toEqual(DUPLICATE);
        expect(sent).toEqual([expect.stringMatching(/^select state from "flag_webhooks_inbox" where /)]);
        expect(await database.openTransactions()).toBe(0);
        expect(await effects(id)).toBe(1);
      });

      it("a copy of an id another receiver handled: from its claim, not waiting on the row's lock, then, known here, from one read", async () => {
        const id = `evt_${randomUUID()}`;
        expect(await make("met-elsewhere")(event(id))).toBeUndefined();
        const sent: Sent = [];
        const here = make("met-elsewhere", sent);
        const lock = await lockRow("met-elsewhere", id);
        try {
          // A new id here would find nothing in a read: the claim goes first, and ends in ROLLBACK.
          expect(await here(event(id))).toEqual(DUPLICATE);
          expect(sent.some((text) => /^select state from/.test(text))).toBe(false);
          expect(sent.at(-1)).toMatch(/^rollback/i);
          sent.length = 0;
          expect(await here(event(id))).toEqual(DUPLICATE);
          expect(sent).toEqual([expect.stringMatching(/^select state from "flag_webhooks_inbox" where /)]);
        } finally {
          await lock.free();
        }
        expect(await effects(id)).toBe(1);
      });
    });
  }

  it("a copy of an id still in its first transaction answers 409 past lockTimeout, then a duplicate once it committed", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let entered = () => {};
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const onEvent = new PostgresInbox(pool(4), { scope: "in-flight", lockTimeout: 100 }).handle(async (e, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [e.id]);
      entered();
      await gate;
    });
    const id = `evt_${randomUUID()}`;
    const first = onEvent(event(id));
    await inHandler;
    await expect(onEvent(event(id))).rejects.toMatchObject({ code: "delivery_in_progress", status: 409 });
    open();
    expect(await first).toBeUndefined();
    expect(await onEvent(event(id))).toEqual(DUPLICATE);
    expect(await effects(id)).toBe(1);
  });

  it("an id past its retention is handled again, as a new one", async () => {
    const onEvent = new PostgresInbox(pool(2), { scope: "expired" }).handle(async (e, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [e.id]);
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent(event(id))).toBeUndefined();
    expect(await onEvent(event(id))).toEqual(DUPLICATE);
    // Its retention over: what prune() would delete, and what a new delivery takes over.
    await database.admin.query(
      "update flag_webhooks_inbox set expires_at = now() - interval '1 second' where scope = 'expired' and id = $1",
      [id],
    );
    expect(await onEvent(event(id))).toBeUndefined();
    expect(await effects(id)).toBe(2);
  });
});
