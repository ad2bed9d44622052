import { setTimeout as sleep } from "node:timers/promises";
import { PostgresInbox } from "flag-webhooks/postgres";
import { createEvent } from "flag-webhooks/testing";
import pg from "pg";
import postgres from "postgres";
import { afterAll, describe, expect, it, vi } from "vitest";
import { adapterReceiver } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { describeKeepThenWork, type KeepingInbox, stuckAttempt } from "../../support/keep-then-work.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Keep-then-work on a real PostgreSQL, over pg (two pools: two workers racing with FOR UPDATE
// SKIP LOCKED) and postgres.js. The table is the one migrate() made for the effects database.

const availability = postgresAvailability();
const skip = availability.available ? undefined : availability.reason;
const database = effectsDatabase(availability.available);
const ends: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const end of ends.splice(0)) await end();
});

const setBody = async (scope: string, id: string, body: string) => {
  await database.admin.query("update flag_webhooks_inbox set body = $3 where scope = $1 and id = $2", [
    scope,
    id,
    body,
  ]);
};

describeKeepThenWork(
  "Postgres over pg",
  async () => {
    const [a, b] = [database.pool(6), database.pool(6)];
    const make = (pool: typeof a, scope: string, now: () => number, retention?: number) =>
      new PostgresInbox(pool, { scope, now, ...(retention ? { retention } : {}) }) as unknown as KeepingInbox;
    return {
      inbox: (scope, now, retention) => make(a, scope, now, retention),
      peer: (scope, now) => make(b, scope, now),
      write: (tx, id) =>
        (tx as { query(text: string, values: unknown[]): Promise<unknown> }).query(
          "insert into effects (event_id) values ($1)",
          [id],
        ),
      effects: (id) => database.effects(id),
      setBody,
    };
  },
  skip,
);

describeKeepThenWork(
  "Postgres over postgres.js",
  async () => {
    const sql = postgres(database.url, { max: 6, onnotice: () => {} });
    ends.push(() => sql.end());
    return {
      inbox: (scope, now, retention) =>
        new PostgresInbox(sql, { scope, now, ...(retention ? { retention } : {}) }) as unknown as KeepingInbox,
      write: (tx, id) => (tx as typeof sql).unsafe("insert into effects (event_id) values ($1)", [id]),
      effects: (id) => database.effects(id),
      setBody,
    };
  },
  skip,
);

describe.skipIf(skip !== undefined)("PostgresInbox.migrate() on a table handle() made", () => {
  it("adds the columns, widens the state check without a scan, keeps every row, and handle() works as before", async () => {
    const admin = database.admin;
    // The table as migrate() made it before keep-then-work.
    await admin.query(`create table old_inbox (
        scope text not null, id text not null, state text not null check (state in ('claimed', 'done')),
        token text, expires_at timestamptz not null, handled_at timestamptz not null default now(),
        primary key (scope, id))`);
    const inbox = new PostgresInbox(database.pool(3), { scope: "old", table: "old_inbox" });
    const handled = inbox.handle(async (event, tx) => {
      await tx.query("insert into effects (event_id) values ($1)", [event.id]);
    });
    await handled({ id: "evt_before_pg", type: "flag.updated" } as never);
    await inbox.migrate();
    await inbox.migrate();
    const { rows: checks } = await admin.query(
      "select conname, convalidated from pg_constraint where conrelid = 'old_inbox'::regclass and contype = 'c'",
    );
    expect(checks).toEqual([{ conname: "flag_webhooks_inbox_states", convalidated: false }]);
    const { rows: columns } = await admin.query(
      "select column_name from information_schema.columns where table_name = 'old_inbox'",
    );
    expect(columns.map((c) => c.column_name)).toEqual(
      expect.arrayContaining(["body", "attempts", "next_at", "lease_until", "last_error", "received_at"]),
    );
    expect(await inbox.kept("evt_before_pg")).toMatchObject({ state: "done", attempts: 0, body: null });
    expect(await inbox.enqueue()({ id: "evt_before_pg", type: "flag.updated" } as never)).toMatchObject({
      status: 204,
    });
    expect(await handled({ id: "evt_after_pg", type: "flag.updated" } as never)).toBeUndefined();
    expect(await handled({ id: "evt_after_pg", type: "flag.updated" } as never)).toMatchObject({ status: 204 });
    expect(await inbox.enqueue()({ id: "evt_new_pg", type: "flag.updated" } as never)).toEqual({ status: 202 });
    await expect(admin.query("update old_inbox set state = 'gone' where id = 'evt_new_pg'")).rejects.toThrow(
      /flag_webhooks_inbox_states/,
    );
  });
});

describe.skipIf(skip !== undefined)("PostgresInbox.enqueue() when Postgres cannot take the event", () => {
  it("answers 503 with Retry-After, and keeps nothing", async () => {
    const port = await freePort();
    const down = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/none`, max: 2 });
    ends.push(() => down.end());
    const send = await adapterReceiver("fetch", {
      secret: "whsec-down",
      onEvent: new PostgresInbox(down, { scope: "down", timeout: 1000, lockTimeout: 500 }).enqueue(),
    });
    const refused = await send(eventJson("evt_down"));
    expect(refused.status).toBe(503);
    // The answer names the store that failed.
    expect(refused.json?.error).toMatchObject({
      code: "store_unavailable",
      message: "the Postgres inbox is unavailable; retry later",
    });
    expect(refused.headers["retry-after"]).toBeDefined();
  });
});

describe.skipIf(skip !== undefined)(
  "keep then work: an attempt whose deadline passes before its transaction begins",
  () => {
    it("rolls back the transaction that begins late: no connection is left idle in a transaction", async () => {
      // A pool of 2: the inbox holds at most one connection for its transactions, and a handle()
      // delivery holds it while its handler waits, so the attempt's BEGIN waits past its deadline.
      const inbox = new PostgresInbox(database.pool(2), { scope: `late-${Date.now()}` });
      let release = () => {};
      let entered = () => {};
      const inHandler = new Promise<void>((resolve) => {
        entered = resolve;
      });
      const held = inbox.handle(
        () =>
          new Promise<void>((resolve) => {
            release = resolve;
            entered();
          }),
      )({ id: `evt_holding_${Date.now()}`, type: "flag.updated" } as never);
      // Its transaction is open once its handler runs.
      await inHandler;
      const id = `evt_late_${Date.now()}`;
      await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
      const worker = inbox.work(() => {}, { interval: false, deadline: 200, retries: ["1h"] });
      expect(await worker.drain()).toBe(1);
      expect((await inbox.kept(id))?.lastError).toMatch(/deadline of 200 ms/);
      release();
      await held;
      await sleep(300);
      expect(await database.openTransactions()).toBe(0);
      await worker.close();
    });
  },
);

describe.skipIf(skip !== undefined)("keep then work: an attempt that waits for a connection", () => {
  it("does not count the wait against its handler's deadline: 450 ms waiting, then 300 ms of handler, under 600 ms, is done", async () => {
    // A pool of 2: the inbox lends one transaction at a time, and a handle() delivery holds it for
    // 500 ms, so the attempt's BEGIN waits (its take, outside any transaction, does not).
    const inbox = new PostgresInbox(database.pool(2), { scope: `wait-${Date.now()}` });
    const held = inbox.handle(() => sleep(500))({
      id: `evt_holding_wait_${Date.now()}`,
      type: "flag.updated",
    } as never);
    await sleep(50);
    const id = `evt_wait_${Date.now()}`;
    await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
    const worker = inbox.work(
      async (event, tx) => {
        await sleep(300);
        await tx.query("insert into effects (event_id) values ($1)", [event.id]);
      },
      { interval: false, deadline: 600, retries: ["1h"] },
    );
    expect(await worker.drain()).toBe(1);
    await held;
    await worker.close();
    expect(await inbox.kept(id)).toMatchObject({ state: "done", attempts: 1, lastError: null });
    expect(await database.effects(id)).toBe(1);
  });
});

describe.skipIf(skip !== undefined)(
  "keep then work, attacked: a handler stuck in a statement past its deadline",
  () => {
    // Past the deadline the worker drops its connection, but the backend keeps waiting in the
    // handler's statement and keeps the row's lock, so recording the failed attempt would wait on
    // that lock as long as the statement waits (here until the test lets go): drain() and close()
    // would hang. The worker cancels that statement (pg_cancel_backend of the pid still in the
    // attempt's transaction): the transaction rolls back and frees the row at once.
    /** An advisory lock held on its own connection, as stuckAttempt() takes it: its key, and its release. */
    const advisoryLock = (key: number) => async () => {
      const holder = await database.admin.connect();
      await holder.query("select pg_advisory_lock($1)", [key]);
      return async () => {
        await holder.query("select pg_advisory_unlock($1)", [key]);
        holder.release();
      };
    };

    it("ends the attempt at its deadline while the handler's statement still waits on the server", async () => {
      const key = Math.floor(Math.random() * 1e9);
      const { id, inbox } = await stuckAttempt(
        () => new PostgresInbox(database.pool(3), { scope: `stuck-${Date.now()}` }) as unknown as KeepingInbox,
        async (tx, eventId) => {
          await (tx as pg.PoolClient).query("insert into effects (event_id) values ($1)", [eventId]);
          // Ignores its signal: the statement waits on the server for a lock the test holds.
          await (tx as pg.PoolClient).query("select pg_advisory_xact_lock($1)", [key]);
        },
        advisoryLock(key),
      );
      expect((await inbox.kept(id))?.lastError).toMatch(/deadline of 150 ms/);
      expect(await database.effects(id)).toBe(0);
    }, 20_000);

    // The same on postgres.js, whose ROLLBACK would wait behind the handler's statement.
    it("postgres.js: ends the attempt at its deadline while the handler's statement still waits", async () => {
      const key = Math.floor(Math.random() * 1e9);
      const sql = postgres(database.url, { max: 3, onnotice: () => {} });
      ends.push(() => sql.end());
      const { id, inbox } = await stuckAttempt(
        () => new PostgresInbox(sql, { scope: `stuck-js-${Date.now()}` }) as unknown as KeepingInbox,
        (tx) => (tx as postgres.Sql).unsafe("select pg_advisory_xact_lock($1)", [key]),
        advisoryLock(key),
      );
      expect((await inbox.kept(id))?.lastError).toMatch(/deadline of 150 ms/);
    }, 20_000);
  },
);

/**
 * A handler whose first attempt ignores its deadline and, once the retry wrote its effect, writes
 * through its tx again; resolves with what that late write did and the effect rows of the event.
 */
async function lateWrite(sql: pg.Pool | postgres.Sql, write: (tx: unknown, id: string) => Promise<unknown>) {
  const inbox = new PostgresInbox(sql, { scope: `late-${Date.now()}` });
  const id = `evt_late_${Date.now()}`;
  await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
  let late = "";
  let retried = () => {};
  const retry = new Promise<void>((resolve) => {
    retried = resolve;
  });
  const worker = inbox.work(
    async (event, tx, { attempt, signal }) => {
      if (attempt > 1) {
        await write(tx, event.id);
        retried();
        return;
      }
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
      await retry;
      try {
        await write(tx, event.id);
        late = "written";
      } catch (error) {
        late = (error as Error).message;
      }
    },
    { interval: false, deadline: 150, lease: "1m", retries: ["1ms"], jitter: 0 },
  );
  // The retry is due 1 ms after the first attempt's failure: a drain usually runs both, but on a
  // loaded machine it can end before the retry is due (1 of 3,415 in a CI run), so drain again.
  let ran = await worker.drain();
  for (let tries = 0; ran < 2 && tries < 50; tries++) ran += await worker.drain();
  expect(ran).toBe(2);
  await worker.close();
  await vi.waitFor(() => expect(late).not.toBe(""), { timeout: 5_000, interval: 20 });
  expect(await inbox.kept(id)).toMatchObject({ state: "done", attempts: 2 });
  return { late, effects: await database.effects(id) };
}

describe.skipIf(skip !== undefined)(
  "keep then work, attacked: a handler that writes through tx past its deadline",
  () => {
    it("pg: the late write is refused (its client is closed) and the effect exists once", async () => {
      const written = await lateWrite(database.pool(4), (tx, id) =>
        (tx as pg.PoolClient).query("insert into effects (event_id) values ($1)", [id]),
      );
      expect(written).toEqual({ late: expect.stringMatching(/not queryable/), effects: 1 });
    });

    // Past the deadline the worker gives up the attempt's transaction; postgres.js would run a
    // statement of the tx the handler still holds on the connection, outside any transaction, and a
    // handler that ignores its signal would double the retry's effect: its tx refuses every
    // statement once the transaction is given up, as pg's and the SQLite drivers' do.
    it("postgres.js: the late write is refused and the effect exists once", async () => {
      const sql = postgres(database.url, { max: 4, onnotice: () => {} });
      ends.push(() => sql.end());
      const written = await lateWrite(sql, (tx, id) =>
        (tx as postgres.Sql).unsafe("insert into effects (event_id) values ($1)", [id]),
      );
      expect(written.effects).toBe(1);
      expect(written.late).not.toBe("written");
      expect(written.late).toMatch(/transaction has ended/);
    });
  },
);

describe.skipIf(skip !== undefined)(
  "keep then work, attacked: more events taken at once than the pool has connections",
  () => {
    // A pool of 2 lends the inbox one transaction at a time: a worker that took `concurrency` (12)
    // events at once, counting an attempt of each, had them queue for it with their deadlines
    // running, and events whose handler always succeeds well within its deadline spent their
    // attempts waiting and ended parked (4 of 12), some without their handler ever running. A
    // worker takes no more events than the database holds transactions at once, and the handler's
    // deadline starts once its transaction has begun.
    it("a handler that succeeds in 100 ms under a deadline of 500 ms parks no event", async () => {
      const inbox = new PostgresInbox(database.pool(2), { scope: `crowd-${Date.now()}` });
      const ids = Array.from({ length: 12 }, (_, i) => `evt_crowd_${Date.now()}_${i}`);
      for (const id of ids) await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
      const runs = new Map<string, number>();
      const worker = inbox.work(
        async (event, tx) => {
          runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
          await sleep(100);
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
        },
        { interval: false, concurrency: 12, deadline: 500, retries: ["1ms"], jitter: 0 },
      );
      await worker.drain();
      await worker.close();
      const parked = await inbox.parked();
      const neverRan = parked.filter((event) => !runs.has(event.id)).length;
      expect({ parked: parked.length, neverRan }).toEqual({ parked: 0, neverRan: 0 });
    }, 30_000);
  },
);
