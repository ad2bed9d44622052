import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on replay() and purge() of one id while its attempt runs (the handler waits on a gate,
// its write through tx done): the replay must not make a running event due again (a second run
// beside the first), and the purge must neither cut the attempt short by half nor be lost.

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
const files: Database.Database[] = [];
afterAll(() => {
  for (const db of files) db.close();
});

interface Subject {
  inbox: PostgresInbox<never> | SqliteInbox;
  effect(tx: unknown, id: string): Promise<unknown>;
  effects(id: string): Promise<number>;
}

const SUBJECTS: { name: string; available: boolean; make(): Subject }[] = [
  {
    name: "SQLite (better-sqlite3)",
    available: true,
    make() {
      const db = new Database(databaseFile());
      files.push(db);
      db.pragma("journal_mode = wal");
      db.exec("create table effects (event_id text not null)");
      return {
        inbox: new SqliteInbox(db, { scope: "replay-running", timeout: "3s" }),
        effect: async (tx, id) =>
          (tx as Database.Database).prepare("insert into effects (event_id) values (?)").run(id),
        effects: async (id) =>
          (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n,
      };
    },
  },
  {
    name: "Postgres (pg)",
    available: availability.available,
    make() {
      return {
        inbox: new PostgresInbox(database.pool(4), { scope: `replay-running-${randomUUID()}` }) as PostgresInbox<never>,
        effect: (tx, id) =>
          (tx as { query(sql: string, params: unknown[]): Promise<unknown> }).query(
            "insert into effects (event_id) values ($1)",
            [id],
          ),
        effects: (id) => database.effects(id),
      };
    },
  },
];

for (const { name, available, make } of SUBJECTS) {
  describe.runIf(available)(`${name}: replay and purge of an event whose attempt runs`, () => {
    it("held: replay() while it runs makes nothing due (0), the handler runs once; purge() waits for the attempt and empties the done row (its id kept, within its retention)", async () => {
      const subject = make();
      await subject.inbox.migrate();
      const id = `evt_${randomUUID()}`;
      await subject.inbox.enqueue()(createEvent("flag.updated", { id }));
      let open: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      let entered: () => void = () => {};
      const inside = new Promise<void>((resolve) => {
        entered = resolve;
      });
      let runs = 0;
      const worker = subject.inbox.work(
        async (event, tx) => {
          runs++;
          await subject.effect(tx, event.id);
          entered();
          await gate;
        },
        { interval: false },
      );
      const drained = worker.drain();
      await inside;
      // While it runs: a replay (on SQLite it waits for the attempt's write lock), then a purge.
      const replayed = subject.inbox.replay(id);
      const purged = subject.inbox.purge(id);
      setTimeout(open, 200);
      expect(await replayed).toBe(0);
      expect(await drained).toBe(1);
      expect(await purged).toBe(1);
      // Nothing left to run: a second drain runs nothing.
      expect(await worker.drain()).toBe(0);
      await worker.close();
      const kept = await subject.inbox.kept(id);
      expect({
        runs,
        effects: await subject.effects(id),
        kept: kept && { state: kept.state, body: kept.body },
      }).toEqual({
        runs: 1,
        effects: 1,
        kept: { state: "done", body: null },
      });
    });
  });
}
