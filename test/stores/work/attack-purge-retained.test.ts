import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { run } from "../../support/cli.js";
import { eventJson } from "../../support/deliveries.js";
import { inboxSubjects } from "../../support/inbox-subjects.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on purge of a done event within its retention (its body dropped, its id kept as done
// until prune()): copies racing the purge, replay of the purged id, prune then a copy, and how the
// inbox and the command show it, on SQLite and Postgres.

const SECRET = "whsec-attack-purge-retained";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);
const SUBJECTS = inboxSubjects(database, availability.available);
const EVENTS = 12;

for (const { name, available, make } of SUBJECTS) {
  describe.runIf(available)(`${name}: a done event purged within its retention`, () => {
    async function handled(n: number) {
      const subject = make({ scope: "purge-retained" });
      await subject.inbox.migrate();
      const send = await adapterReceiver("fetch", { secret: SECRET, maxAge: "5m", onEvent: subject.inbox.enqueue() });
      const bodies = new Map(Array.from({ length: n }, () => `evt_${randomUUID()}`).map((id) => [id, eventJson(id)]));
      for (const body of bodies.values()) expect((await send(body)).status).toBe(202);
      const worker = subject.inbox.work((event, tx) => subject.effect(tx, event.id), { interval: false });
      await worker.drain();
      return { ...subject, send, bodies, worker };
    }

    it("copies sent while purge({ state: 'done' }) runs: each a duplicate 204, each effect once", async () => {
      const { inbox, send, bodies, worker, effects } = await handled(EVENTS);
      const copies = [...bodies.values(), ...bodies.values()].map((body) => send(body).then((a) => a.status));
      const [purged, statuses] = await Promise.all([inbox.purge({ state: "done" }), Promise.all(copies)]);
      await worker.drain();
      await worker.close();
      expect(purged).toBe(EVENTS);
      expect(new Set(statuses)).toEqual(new Set([204]));
      for (const id of bodies.keys()) {
        expect(await effects(id)).toBe(1);
        expect(await inbox.kept(id)).toMatchObject({ state: "done", body: null });
      }
    });

    it("replay of a purged id, by id and since: nothing made due, nothing run again", async () => {
      const { inbox, bodies, worker, effects } = await handled(2);
      const [id] = bodies.keys() as unknown as [string];
      expect(await inbox.purge(id)).toBe(1);
      expect(await inbox.replay(id)).toBe(0);
      expect(await inbox.replay({ since: new Date(0) })).toBe(0);
      await worker.drain();
      await worker.close();
      expect(await effects(id)).toBe(1);
      expect((await inbox.pending()).map((e) => e.id)).not.toContain(id);
      expect((await inbox.parked()).map((e) => e.id)).not.toContain(id);
      expect(await inbox.counts()).toMatchObject({ pending: 0, running: 0, parked: 0 });
    });

    it("prune() then a copy: the purged id is still within its retention, the copy a duplicate 204", async () => {
      const { inbox, send, bodies, worker, effects } = await handled(1);
      const [[id, body]] = [...bodies] as [[string, string]];
      expect(await inbox.purge({ state: "done" })).toBe(1);
      expect(await inbox.prune()).toBe(0);
      expect((await send(body)).status).toBe(204);
      await worker.drain();
      await worker.close();
      expect(await effects(id)).toBe(1);
    });
  });
}

describe("the command on a done event purged within its retention", () => {
  const scope = "purged-show";
  async function purgedOn(inbox: SqliteInbox | PostgresInbox<never>) {
    await inbox.migrate();
    const id = `evt_${randomUUID()}`;
    const send = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
    expect((await send(eventJson(id))).status).toBe(202);
    const worker = inbox.work(() => {}, { interval: false });
    await worker.drain();
    await worker.close();
    expect(await inbox.purge(id)).toBe(1);
    return id;
  }
  const targets = [
    {
      name: "SQLite",
      available: true,
      async make() {
        const file = databaseFile();
        const db = new Database(file);
        db.pragma("journal_mode = wal");
        const id = await purgedOn(new SqliteInbox(db, { scope }));
        db.close();
        return { db: file, id };
      },
    },
    {
      name: "Postgres",
      available: availability.available,
      async make() {
        const s = `${scope}-${randomUUID().slice(0, 8)}`;
        const id = await purgedOn(new PostgresInbox(database.pool(2), { scope: s }) as PostgresInbox<never>);
        return { db: database.url, id, scope: s };
      },
    },
  ];
  for (const target of targets) {
    it.runIf(target.available)(
      `${target.name}: show says body purged; --json gives body null; list leaves it out; purge again finds nothing`,
      async () => {
        const made = await target.make();
        const at = ["--db", made.db, "--scope", "scope" in made ? String(made.scope) : scope];
        const show = await run(["inbox", "show", made.id, ...at]);
        expect(show.code).toBe(0);
        expect(show.stdout).toContain("body purged");
        const json = await run(["inbox", "show", made.id, ...at, "--json"]);
        expect(json.code).toBe(0);
        expect(JSON.parse(json.stdout)).toMatchObject({ id: made.id, state: "done", body: null });
        const list = await run(["inbox", "list", ...at]);
        expect(list.code).toBe(0);
        expect(list.stdout).not.toContain(made.id);
        const again = await run(["inbox", "purge", made.id, ...at]);
        expect(again.stdout).toBe("Purged 0 events.\n");
      },
    );
  }
});
