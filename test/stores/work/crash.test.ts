import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { build } from "esbuild";
import type { WebhookEvent } from "flag-webhooks";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startReceiverProcess } from "../../support/crash.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { type Started, untilPrinted } from "../../support/processes.js";
import { databaseFile } from "../../support/sqlite.js";

// A worker SIGKILLed mid-handler (test/fixtures/keep-worker.ts, on Postgres and on a SQLite
// file): its attempt was counted when it took the event, its effect never committed; after the
// lease another worker takes the event again, and its effect exists exactly once. A poison event
// that kills every worker that runs it still ends parked once its attempts are spent.

const root = resolve(import.meta.dirname, "../../..");
const bundle = join(root, ".test-results/keep-worker.cjs");
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
const started: Started[] = [];

beforeAll(async () => {
  await build({
    entryPoints: [join(root, "test/fixtures/keep-worker.ts")],
    bundle: true,
    platform: "node",
    format: "cjs",
    outfile: bundle,
    external: ["pg-native", "better-sqlite3"],
    logLevel: "warning",
  });
}, 60_000);
afterAll(async () => {
  await Promise.all(started.map((child) => child.stop()));
});

/** Starts a worker process with `env`, and waits until it runs the handler of `id` (attempt `attempt`). */
async function killedInside(env: Record<string, string>, id: string, attempt: number): Promise<void> {
  const child = await startReceiverProcess("keep worker", process.execPath, [bundle], {
    cwd: root,
    env: { ...process.env, ...env },
  });
  started.push(child);
  await untilPrinted("keep worker's handler", child, `start ${id} ${attempt}`, { within: 10_000 });
  await child.kill();
}

interface Subject {
  inbox(scope: string): PostgresInbox | SqliteInbox;
  env: Record<string, string>;
  effects(id: string): Promise<number>;
  write(tx: unknown, id: string): unknown;
}

const subjects: [string, boolean, () => Promise<Subject>][] = [
  [
    "Postgres (pg)",
    availability.available,
    async () => {
      await database.admin.query("create table if not exists keep_effects (event_id text not null)");
      const pool = database.pool(4);
      return {
        inbox: (scope) => new PostgresInbox(pool, { scope }),
        env: { DATABASE_URL: database.url },
        effects: async (id) =>
          Number(
            (await database.admin.query("select count(*) from keep_effects where event_id = $1", [id])).rows[0].count,
          ),
        write: (tx, id) =>
          (tx as { query(text: string, values: unknown[]): unknown }).query(
            "insert into keep_effects (event_id) values ($1)",
            [id],
          ),
      };
    },
  ],
  [
    "SQLite (better-sqlite3)",
    true,
    async () => {
      const file = databaseFile();
      const db = new Database(file);
      db.pragma("journal_mode = wal");
      db.exec("create table keep_effects (event_id text not null)");
      afterAll(() => db.close());
      return {
        inbox: (scope) => new SqliteInbox(db, { scope }),
        env: { SQLITE_FILE: file },
        effects: async (id) =>
          Number((db.prepare("select count(*) as n from keep_effects where event_id = ?").get(id) as { n: number }).n),
        write: (tx, id) => (tx as Database.Database).prepare("insert into keep_effects (event_id) values (?)").run(id),
      };
    },
  ],
];

describe.each(subjects)("keep then work through a SIGKILLed worker: %s", (_, available, make) => {
  it.skipIf(!available)(
    "takes the event again after the lease: its effect exists exactly once",
    async () => {
      const s = await make();
      const scope = `crash-${Date.now()}`;
      const inbox = s.inbox(scope);
      await inbox.migrate();
      const id = `evt_crash_${Date.now()}`;
      await inbox.enqueue()(createEvent("flag.updated", { id }) as WebhookEvent);
      await killedInside({ ...s.env, SCOPE: scope }, id, 1);
      expect(await inbox.kept(id)).toMatchObject({ state: "running", attempts: 1 });
      expect(await s.effects(id)).toBe(0);
      const worker = inbox.work((event, tx) => s.write(tx, event.id), { interval: false });
      // Before the lease lapses, the event is still the dead worker's.
      expect(await worker.drain()).toBe(0);
      await sleep(1_100);
      expect(await worker.drain()).toBe(1);
      await worker.close();
      expect(await s.effects(id)).toBe(1);
      expect(await inbox.kept(id)).toMatchObject({ state: "done", attempts: 2 });
    },
    30_000,
  );

  it.skipIf(!available)(
    "parks a poison event that kills every worker, once its attempts are spent",
    async () => {
      const s = await make();
      const scope = `poison-${Date.now()}`;
      const inbox = s.inbox(scope);
      await inbox.migrate();
      const id = `evt_poison_${Date.now()}`;
      await inbox.enqueue()(createEvent("flag.updated", { id }) as WebhookEvent);
      // The worker's schedule has two attempts: both die.
      await killedInside({ ...s.env, SCOPE: scope }, id, 1);
      await killedInside({ ...s.env, SCOPE: scope }, id, 2);
      await sleep(1_100);
      let runs = 0;
      const worker = inbox.work(() => void runs++, { interval: false, retries: ["10ms"] });
      expect(await worker.drain()).toBe(0);
      await worker.close();
      expect(runs).toBe(0);
      const [parked] = await inbox.parked();
      expect(parked).toMatchObject({ id, state: "parked", attempts: 2 });
      expect(parked?.lastError).toMatch(/attempt 2 of 2 ended without a result/);
      expect(await s.effects(id)).toBe(0);
    },
    30_000,
  );
});
