import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { type KeptHandler, PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { MIRROR_ROWS, MIRROR_TABLE, mirrorStatements, snapshotOf, sqlite } from "../../support/order-mirror.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on ordered keep-then-work: a kept event runs whenever the worker (or a replay) gets to it,
// however long after it came, but a flag's positions expired `retention` after their last write
// (30 days by default, or what the inbox is given) and were then read as absent. A parked old event
// replayed after that, or an old event still on its retry schedule when the retention is shorter
// than the schedule (the default schedule spans 68.6 h), was judged against no positions and
// applied over the newer value that succeeded meanwhile. No receiver is involved at that point, so
// `maxAge` (which makes expiry safe for handle()) refuses nothing. Shown here with a retention of
// 1 s; with the defaults it is a parked event replayed more than 30 days after the newer change.
// Fixed: a flag's positions are read whether their retention has run out or not, and prune()
// deletes expired ones only while the scope keeps no event (pending, running or parked).

const rollout = (id: string, createdAt: string, to: number) =>
  createEvent("flag.updated", {
    id,
    createdAt,
    data: { flag: "checkout", changes: [{ path: "rollout.percent", from: null, to }] },
  }) as WebhookEvent;
const ROLLOUT = JSON.stringify(["checkout", "production", "rollout.percent"]);
const RETENTION = 1000;
/** Lets the flag's positions outlive their retention, then prunes while the old event is parked. */
const expireAndPrune = async (inbox: { prune(): Promise<number> }) => {
  await sleep(RETENTION + 500);
  await inbox.prune();
};

interface Subject {
  inbox(scope: string): Promise<SqliteInbox | PostgresInbox>;
  exec(tx: unknown, sql: string, params: string[]): Promise<unknown>;
  mirror(scope: string): Promise<Record<string, unknown>>;
}

/** The old event parked, the newer done; then `between` (the retention's wait, or a purge of the newer), and the old replayed. */
async function replayAfter(s: Subject, between: (inbox: SqliteInbox | PostgresInbox) => Promise<unknown>) {
  const scope = `expiry-${randomUUID().slice(0, 8)}`;
  const inbox = await s.inbox(scope);
  let down = true;
  const fn: KeptHandler<unknown> = async (event, tx) => {
    for (const [sql, params] of mirrorStatements(scope, event)) await s.exec(tx, sql, params);
    if (down && event.id === "evt_old") throw new Error("the mirror's API is down");
  };
  const worker = inbox.work(fn as never, { interval: false, retries: [], jitter: 0 });
  try {
    await inbox.enqueue()(rollout("evt_old", "2026-11-21T09:01:00Z", 10));
    await worker.drain();
    expect(await inbox.parked()).toMatchObject([{ id: "evt_old" }]);
    await inbox.enqueue()(rollout("evt_new", "2026-11-21T09:02:00Z", 50));
    await worker.drain();
    expect(await s.mirror(scope)).toEqual({ [ROLLOUT]: 50 });
    await between(inbox);
    down = false;
    expect(await inbox.replay("evt_old")).toBe(1);
    await worker.drain();
    expect(await inbox.kept("evt_old")).toMatchObject({ state: "done" });
    return s.mirror(scope);
  } finally {
    await worker.close();
  }
}

describe("ordered keep then work: a parked old event replayed after its flag's positions expired", () => {
  const db = new Database(databaseFile());
  db.pragma("journal_mode = wal");
  db.exec(MIRROR_TABLE);
  afterAll(() => db.close());
  const sqliteSubject: Subject = {
    async inbox(scope) {
      const inbox = new SqliteInbox(db, { scope, retention: RETENTION, order: true });
      await inbox.migrate();
      return inbox;
    },
    exec: async (tx, sql, params) => (tx as Database.Database).prepare(sqlite(sql)).run(...params),
    mirror: async (scope) => snapshotOf(db.prepare(sqlite(MIRROR_ROWS)).all(scope) as Record<string, unknown>[]),
  };

  it("SQLite: replayed past the positions' retention, and after a prune(), the old 10 % is stale and the mirror keeps 50 %", async () => {
    // The newer change's positions outlive their retention while the old event stays parked.
    expect(await replayAfter(sqliteSubject, expireAndPrune)).toEqual({ [ROLLOUT]: 50 });
  });

  // Held: purging the newer event's row leaves its flag's positions, so the replayed old one is stale.
  it("SQLite: a parked old event replayed after the newer one was purged is stale, the mirror keeps 50 %", async () => {
    expect(await replayAfter(sqliteSubject, (inbox) => inbox.purge("evt_new"))).toEqual({ [ROLLOUT]: 50 });
  });

  const availability = postgresAvailability();
  const database = effectsDatabase(availability.available);
  let made = false;
  const postgresSubject: Subject = {
    async inbox(scope) {
      const inbox = new PostgresInbox(database.pool(4), { scope, retention: RETENTION, order: true });
      if (!made) {
        await inbox.migrate();
        await database.admin.query(MIRROR_TABLE);
        made = true;
      }
      return inbox;
    },
    exec: (tx, sql, params) => (tx as pg.PoolClient).query(sql, params),
    mirror: async (scope) => snapshotOf((await database.admin.query(MIRROR_ROWS, [scope])).rows),
  };

  it.skipIf(!availability.available)(
    "Postgres: replayed past the positions' retention, and after a prune(), the old 10 % is stale and the mirror keeps 50 %",
    async () => {
      expect(await replayAfter(postgresSubject, expireAndPrune)).toEqual({ [ROLLOUT]: 50 });
    },
  );
});
