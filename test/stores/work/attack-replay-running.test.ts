import { randomUUID } from "node:crypto";
import { createEvent } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { inboxSubjects } from "../../support/inbox-subjects.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attack on replay() and purge() of one id while its attempt runs (the handler waits on a gate,
// its write through tx done): the replay must not make a running event due again (a second run
// beside the first), and the purge must neither cut the attempt short by half nor be lost.

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
const SUBJECTS = inboxSubjects(database, availability.available);

for (const { name, available, make } of SUBJECTS) {
  describe.runIf(available)(`${name}: replay and purge of an event whose attempt runs`, () => {
    it("held: replay() while it runs makes nothing due (0), the handler runs once; purge() waits for the attempt and empties the done row (its id kept, within its retention)", async () => {
      const subject = make({ scope: "replay-running", timeout: "3s" });
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
