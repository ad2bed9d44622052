import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers, type Send } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { commitCounting, databaseFile } from "../../support/sqlite.js";

// Attack on group commit when a statement fails inside it, over real HTTP (the fetch adapter):
// SQLite's disk full (max_page_count) under a group, a CHECK constraint of the app's refusing one
// row of a Postgres group, and a trigger that drops one event's row without an error (SQLite's
// RAISE(IGNORE), a Postgres BEFORE trigger returning NULL). What must hold: no row kept by half,
// each delivery answered from its own row (202 kept, 503 not), and the server serving after.

const SECRET = "whsec-attack-group-faults";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);

/** The JSON of a `flag.updated` event with `id`, of `type`, its data padded by `pad` characters. */
function eventOf(id: string, { type = "flag.updated", pad = 0 } = {}): string {
  const event = JSON.parse(eventJson(id)) as { type: string; data: Record<string, unknown> };
  event.type = type;
  if (pad) event.data.pad = "p".repeat(pad);
  return JSON.stringify(event);
}

const statusesOf = async (send: Send, bodies: string[]) =>
  (await Promise.all(bodies.map((body) => send(body)))).map((reply) => reply.status);

describe("SQLite (better-sqlite3): the disk full under a group", () => {
  it("held: 32 deliveries at once with room for 4: the 4 answered 202 are in the file, the 28 answered 503 are not; each retry kept once room is back", async () => {
    const file = databaseFile();
    const raw = new Database(file);
    try {
      raw.pragma("journal_mode = wal");
      raw.pragma("busy_timeout = 3210");
      const { connection, commits } = commitCounting(raw);
      const inbox = new SqliteInbox(connection, { scope: "full", timeout: "2s" });
      await inbox.migrate();
      const pages = raw.pragma("page_count", { simple: true }) as number;
      raw.pragma(`max_page_count = ${pages + 4}`);
      const send = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
      const ids = Array.from({ length: 32 }, () => `evt_${randomUUID()}`);
      const bodies = ids.map((id) => eventOf(id, { pad: 3000 }));
      const statuses = await statusesOf(send, bodies);
      const reader = new Database(file, { readonly: true });
      const kept = ids.map(
        (id) =>
          (reader.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number }).n,
      );
      reader.close();
      // Seen: 4 × 202 and 28 × 503, in 4 COMMITs.
      expect(statuses.filter((status) => status === 503).length).toBeGreaterThan(0);
      expect(statuses.map((status) => (status === 202 ? 1 : 0))).toEqual(kept);
      expect(statuses.every((status) => status === 202 || status === 503)).toBe(true);
      expect(commits()).toBe(kept.filter(Boolean).length);
      expect(raw.pragma("busy_timeout", { simple: true })).toBe(3210);
      raw.pragma(`max_page_count = ${pages + 1000}`);
      expect(await statusesOf(send, bodies)).toEqual(statuses.map((status) => (status === 202 ? 204 : 202)));
    } finally {
      raw.close();
    }
  });
});

/** A receiver whose inbox's table drops the row of a `flag.deleted` event (a trigger, no error). */
interface Dropping {
  send: Send;
  kept(id: string): Promise<number>;
}

async function droppingSqlite(): Promise<Dropping> {
  const raw = new Database(databaseFile());
  raw.pragma("journal_mode = wal");
  const inbox = new SqliteInbox(raw, { scope: "dropped", timeout: "2s" });
  await inbox.migrate();
  raw.exec(`create trigger drop_deleted before insert on flag_webhooks_inbox
    when new.type = 'flag.deleted' begin select raise(ignore); end`);
  afterAll(() => raw.close());
  return {
    send: await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() }),
    kept: async (id) =>
      (raw.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number }).n,
  };
}

async function droppingPostgres(): Promise<Dropping> {
  await database.admin.query(`
    create function drop_deleted() returns trigger language plpgsql as $$ begin
      if new.scope = 'dropped' and new.type = 'flag.deleted' then return null; end if;
      return new;
    end $$;
    create trigger drop_deleted before insert on flag_webhooks_inbox for each row execute function drop_deleted();`);
  const inbox = new PostgresInbox(database.pool(4), { scope: "dropped", timeout: "5s" });
  return {
    send: await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() }),
    kept: async (id) =>
      Number(
        (await database.admin.query("select count(*) from flag_webhooks_inbox where id = $1", [id])).rows[0].count,
      ),
  };
}

const DROPPING = [
  { name: "SQLite (better-sqlite3), RAISE(IGNORE)", available: true, make: droppingSqlite },
  { name: "Postgres, a BEFORE trigger returning NULL", available: availability.available, make: droppingPostgres },
];

for (const { name, available, make } of DROPPING) {
  describe.runIf(available)(`${name}: a row a trigger drops without an error`, () => {
    let dropping: Dropping;
    beforeAll(async () => {
      dropping = await make();
    });

    it("held: in a group of 16, the 15 others are answered 202 and kept, the dropped one is never a 2xx", async () => {
      const ids = Array.from({ length: 16 }, () => `evt_${randomUUID()}`);
      const bodies = ids.map((id, i) => eventOf(id, { type: i === 7 ? "flag.deleted" : "flag.updated" }));
      const statuses = await statusesOf(dropping.send, bodies);
      const kept = await Promise.all(ids.map((id) => dropping.kept(id)));
      expect(kept).toEqual(ids.map((_, i) => (i === 7 ? 0 : 1)));
      expect(statuses.filter((_, i) => i !== 7)).toEqual(ids.slice(1).map(() => 202));
      expect(statuses[7]).toBeGreaterThanOrEqual(400);
      // The server keeps serving.
      expect(await statusesOf(dropping.send, [eventOf(`evt_${randomUUID()}`)])).toEqual([202]);
    });

    // Was broken: nothing held the event, yet it was answered 409 delivery_in_progress, "is being
    // handled by another delivery; retry later", on every retry (3 of 3, alone and in a group):
    // the inbox read "not kept, and no row there" as another delivery's transaction, which sent
    // whoever read the log after a concurrency problem, not after the table refusing the row.
    it("is answered 503 store_unavailable with Retry-After, saying nothing was kept (3 of 3 were 409 in progress)", async () => {
      const body = eventOf(`evt_${randomUUID()}`, { type: "flag.deleted" });
      const replies = await Promise.all([0, 1, 2].map(() => dropping.send(body)));
      expect(
        replies.map((reply) => [
          reply.status,
          reply.json?.error?.code,
          /kept nothing/.test((reply.json?.error as { message?: string } | undefined)?.message ?? ""),
          Boolean(reply.headers["retry-after"]),
        ]),
      ).toEqual(replies.map(() => [503, "store_unavailable", true, true]));
    });
  });
}
