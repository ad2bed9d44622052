import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { type InboxSubject, inboxSubjects } from "../../support/inbox-subjects.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attack on purge() against the promise that a kept event's effects happen once: a done event
// purged while a copy of it can still arrive (within maxAge, well within the inbox's retention).
// purge({ state: "done" }) (and `flag-webhooks inbox purge --state done`) deleted done rows
// whatever their retention, where prune() deletes only those past it: the id that answered the
// copy as a duplicate was gone, so the copy was kept anew and run again. Now a done row within its
// retention loses its body and keeps its id; past the retention it is deleted, as prune() would.

const SECRET = "whsec-attack-purge-done";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);

const SUBJECTS = inboxSubjects(database, availability.available);

for (const { name, available, make } of SUBJECTS) {
  describe.runIf(available)(`${name}: a copy of a done event, after a purge`, () => {
    /**
     * One event delivered (202), run by a worker (its effect once), then `clean` run (given the
     * event's id), then a copy delivered and the worker run again; `later` ms on the inbox's clock
     * pass before `clean`.
     */
    async function copyAfter(clean: (inbox: InboxSubject["inbox"], id: string) => Promise<number>, later = 0) {
      let skew = 0;
      const subject = make({ scope: "purge-done", now: () => Date.now() + skew });
      await subject.inbox.migrate();
      const send = await adapterReceiver("fetch", { secret: SECRET, maxAge: "5m", onEvent: subject.inbox.enqueue() });
      const id = `evt_${randomUUID()}`;
      const body = eventJson(id);
      const first = (await send(body)).status;
      const worker = subject.inbox.work((event, tx) => subject.effect(tx, event.id), { interval: false });
      await worker.drain();
      skew = later;
      const removed = await clean(subject.inbox, id);
      const purged = await subject.inbox.kept(id);
      const left = purged && { state: purged.state, body: purged.body, type: purged.type };
      const copy = (await send(body)).status;
      await worker.drain();
      await worker.close();
      return { first, removed, left, copy, effects: await subject.effects(id) };
    }

    it("held: prune() keeps the id within its retention: the copy is a duplicate 204, the effect once", async () => {
      expect(await copyAfter((inbox) => inbox.prune())).toMatchObject({
        first: 202,
        removed: 0,
        left: { state: "done", body: expect.any(String) },
        copy: 204,
        effects: 1,
      });
    });

    // Was broken: purge({ state: "done" }) deleted the done row 1 s after it was handled (within
    // its retention); the copy that came next, within maxAge, was answered 202, kept anew, and run
    // again: its effect twice, 1 of 1 on each database.
    const emptied = {
      first: 202,
      removed: 1,
      left: { state: "done", body: null, type: "flag.updated" },
      copy: 204,
      effects: 1,
    };

    it("purge({ state: 'done' }) within the retention empties the row: the copy is a duplicate 204, the effect once (was 202, and twice)", async () => {
      expect(await copyAfter((inbox) => inbox.purge({ state: "done" }))).toEqual(emptied);
    });

    it("purge(id) of a done event within the retention empties it alike; a second purge finds nothing left to remove", async () => {
      expect(
        await copyAfter(async (inbox, id) => {
          const removed = await inbox.purge(id);
          expect(await inbox.purge(id)).toBe(0);
          return removed;
        }),
      ).toEqual(emptied);
    });

    it("held: past the retention, purge({ state: 'done' }) deletes the row, as prune() would", async () => {
      const past = 30 * 24 * 3600_000 + 1000;
      expect(await copyAfter((inbox) => inbox.purge({ state: "done" }), past)).toMatchObject({
        first: 202,
        removed: 1,
        left: undefined,
      });
    });
  });
}
