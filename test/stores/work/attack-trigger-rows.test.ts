import { randomUUID } from "node:crypto";
import { createClient } from "@libsql/client";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers, type Send } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on how the receiving side reads what its keeping statement kept, when an app's trigger
// changes the inbox's rows: a trigger that drops some rows of a group, one that renames the id,
// one that deletes the row after the INSERT; and the same triggers on handle()'s claim. A 202
// must mean the event's row committed; a 503 saying "kept nothing" must mean no row was kept; a
// copy of an event handle() handled is a duplicate.

const SECRET = "whsec-attack-trigger-rows";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);

interface Target {
  send: Send;
  inbox: SqliteInbox | PostgresInbox<never>;
  /** The inbox rows whose id starts with `id`. */
  rows(id: string): Promise<string[]>;
  effects(id: string): Promise<number>;
}

const TRIGGERS = {
  sqlite: {
    rename: `create trigger t after insert on flag_webhooks_inbox when new.id like 'evt_rename%' begin
      update flag_webhooks_inbox set id = new.id || '-renamed' where scope = new.scope and id = new.id; end`,
    remove: `create trigger t after insert on flag_webhooks_inbox when new.id like 'evt_remove%' begin
      delete from flag_webhooks_inbox where scope = new.scope and id = new.id; end`,
    dropSome: `create trigger t before insert on flag_webhooks_inbox when new.id like 'evt_drop%' begin
      select raise(ignore); end`,
  },
  postgres: {
    rename: `create function f() returns trigger language plpgsql as $$ begin
      if new.scope = '$S' and new.id like 'evt_rename%' then new.id := new.id || '-renamed'; end if; return new; end $$;
      create trigger t before insert on flag_webhooks_inbox for each row execute function f();`,
    remove: `create function f() returns trigger language plpgsql as $$ begin
      if new.scope = '$S' and new.id like 'evt_remove%' then delete from flag_webhooks_inbox where scope = new.scope and id = new.id; end if; return null; end $$;
      create trigger t after insert on flag_webhooks_inbox for each row execute function f();`,
    dropSome: `create function f() returns trigger language plpgsql as $$ begin
      if new.scope = '$S' and new.id like 'evt_drop%' then return null; end if; return new; end $$;
      create trigger t before insert on flag_webhooks_inbox for each row execute function f();`,
  },
};

async function sqlite(trigger: keyof typeof TRIGGERS.sqlite): Promise<Target> {
  const db = new Database(databaseFile());
  afterAll(() => db.close());
  db.pragma("journal_mode = wal");
  db.exec("create table effects (event_id text not null)");
  const inbox = new SqliteInbox(db, { scope: "trig", timeout: "2s" });
  await inbox.migrate();
  db.exec(TRIGGERS.sqlite[trigger]);
  return {
    inbox,
    send: await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() }),
    rows: async (id) =>
      (db.prepare("select id from flag_webhooks_inbox where id like ? || '%'").all(id) as { id: string }[]).map(
        (r) => r.id,
      ),
    effects: async (id) =>
      (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n,
  };
}
async function postgres(trigger: keyof typeof TRIGGERS.postgres): Promise<Target> {
  const scope = `trig-${randomUUID().slice(0, 8)}`;
  const fn = `f_${randomUUID().slice(0, 8)}`;
  await database.admin.query(
    TRIGGERS.postgres[trigger]
      .replaceAll("$S", scope)
      .replaceAll(" f()", ` ${fn}()`)
      .replaceAll("trigger t ", `trigger ${fn} `),
  );
  const inbox = new PostgresInbox(database.pool(4), { scope, timeout: "5s" }) as PostgresInbox<never>;
  return {
    inbox,
    send: await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() }),
    rows: async (id) =>
      (
        await database.admin.query("select id from flag_webhooks_inbox where scope = $1 and id like $2 || '%'", [
          scope,
          id,
        ])
      ).rows.map((r) => r.id),
    effects: (id) => database.effects(id),
  };
}
const effect = (tx: unknown, id: string) =>
  "execute" in (tx as object)
    ? (tx as { execute(s: { sql: string; args: unknown[] }): Promise<unknown> }).execute({
        sql: "insert into effects (event_id) values (?)",
        args: [id],
      })
    : "query" in (tx as object)
      ? (tx as { query(s: string, p: unknown[]): Promise<unknown> }).query(
          "insert into effects (event_id) values ($1)",
          [id],
        )
      : (tx as Database.Database).prepare("insert into effects (event_id) values (?)").run(id);

/** The same on a local libSQL file (@libsql/client): keeping through BEGIN IMMEDIATE, the INSERT and COMMIT. */
async function libsql(trigger: keyof typeof TRIGGERS.sqlite): Promise<Target> {
  const client = createClient({ url: `file:${databaseFile()}` });
  afterAll(() => client.close());
  await client.execute("pragma journal_mode = wal");
  await client.execute("create table effects (event_id text not null)");
  const inbox = new SqliteInbox(client, { scope: "trig", timeout: "2s" });
  await inbox.migrate();
  await client.execute(TRIGGERS.sqlite[trigger]);
  return {
    inbox,
    send: await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() }),
    rows: async (id) =>
      (await client.execute({ sql: "select id from flag_webhooks_inbox where id like ? || '%'", args: [id] })).rows.map(
        (r) => String(r.id),
      ),
    effects: async (id) =>
      Number(
        (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
      ),
  };
}

const TARGETS = [
  { name: "SQLite (better-sqlite3)", available: true, make: sqlite },
  { name: "SQLite (libSQL, a local file)", available: true, make: libsql },
  { name: "Postgres", available: availability.available, make: postgres },
];

const messageOf = (reply: { json: unknown }) =>
  (reply.json as { error?: { message?: string } } | undefined)?.error?.message ?? "";

for (const { name, available, make } of TARGETS) {
  describe.runIf(available)(`${name}: rows an app's trigger changes`, () => {
    // Held: 8 of 32 deliveries at once dropped by a BEFORE trigger (SQLite's RAISE(IGNORE), a
    // Postgres trigger returning NULL) are each answered 503 with nothing kept, the 24 others 202
    // and kept; one dropped alone (the lone keep on SQLite) is 503 too.
    it("held: a trigger that drops a quarter of a group: each dropped one 503, each other 202 and kept", async () => {
      const t = await make("dropSome");
      const ids = Array.from({ length: 32 }, (_, i) => `evt_${i % 4 === 0 ? "drop" : "keep"}_${randomUUID()}`);
      const statuses = await Promise.all(ids.map(async (id) => (await t.send(eventJson(id))).status));
      const kept = await Promise.all(ids.map(async (id) => (await t.rows(id)).length));
      expect(statuses).toEqual(ids.map((id) => (id.startsWith("evt_drop") ? 503 : 202)));
      expect(kept).toEqual(ids.map((id) => (id.startsWith("evt_drop") ? 0 : 1)));
      expect((await t.send(eventJson(`evt_drop_${randomUUID()}`))).status).toBe(503);
    });

    // Broken, 8 of 8 on each database (one alone, 7 at once): an AFTER INSERT trigger of the
    // app's that deletes the row leaves the INSERT's RETURNING as it was, so the delivery is
    // answered 202 and committed with no row: the sender stops, and the event is lost. A fix reads
    // the kept ids back in the keeping transaction, after the statement (its AFTER triggers run
    // by then), and answers 503 'kept nothing' for an id not there, before COMMIT.
    it.fails("an AFTER trigger that deletes the row: never a 202 without the row", async () => {
      const t = await make("remove");
      const ids = Array.from({ length: 8 }, () => `evt_remove_${randomUUID()}`);
      const alone = (await t.send(eventJson(ids[0] as string))).status;
      const atOnce = await Promise.all(ids.slice(1).map(async (id) => (await t.send(eventJson(id))).status));
      const statuses = [alone, ...atOnce];
      const kept = await Promise.all(ids.map(async (id) => (await t.rows(id)).length));
      const lost = ids.filter((_, i) => statuses[i] === 202 && kept[i] === 0).length;
      console.log(`${name}, AFTER trigger deletes: ${lost} of ${ids.length} answered 202 with no row kept`);
      expect(lost).toBe(0);
    });

    // A trigger that renames the id (Postgres: a BEFORE trigger setting NEW.id; SQLite: an AFTER
    // trigger updating it). Held on both: one row, run once by the worker (its effect once). Seen:
    // on SQLite the first delivery is 202 and each copy 503 (the rename meets the renamed row: a
    // UNIQUE error); on Postgres every delivery, the first included, 503.
    it("held: a trigger that renames the id: one row, its effect once", async () => {
      const t = await make("rename");
      const id = `evt_rename_${randomUUID()}`;
      const body = eventJson(id);
      await t.send(body);
      await Promise.all([0, 1, 2].map(() => t.send(body)));
      const worker = t.inbox.work((event, tx) => effect(tx, event.id), { interval: false });
      await worker.drain();
      await t.send(body);
      await worker.drain();
      await worker.close();
      expect(await t.rows(id)).toEqual([`${id}-renamed`]);
      expect(await t.effects(id)).toBe(1);
    });

    // Broken on Postgres, 1 of 1 (and each of its copies): its RETURNING gives the renamed id, so
    // the inbox reads the delivery's own row as not kept, finds no row under the sent id, and
    // answers 503 "kept nothing ... its row was not stored", though the row was committed and the
    // worker runs it. A fix tells "kept under another id" from "kept nothing" (the statement
    // returned a row for this arrival), and says which. SQLite answers 202 (its AFTER trigger's
    // rename is not seen by RETURNING).
    const onPostgres = name.startsWith("Postgres") ? it.fails : it;
    onPostgres("a delivery whose row a trigger renamed is never told 'kept nothing'", async () => {
      const t = await make("rename");
      const id = `evt_rename_${randomUUID()}`;
      const reply = await t.send(eventJson(id));
      const row = await t.rows(id);
      console.log(`${name}, a renamed id: answered ${reply.status} "${messageOf(reply)}", rows ${JSON.stringify(row)}`);
      expect(row.length === 1 && /kept nothing/.test(messageOf(reply))).toBe(false);
    });
  });
}

describe("handle(): the claim's row changed by a trigger", () => {
  /** Three copies of one event, one after the other, to an inbox's handle() whose handler writes an effect. */
  async function copiesTo(t: Target, id: string) {
    const send = await adapterReceiver("fetch", {
      secret: SECRET,
      onEvent: (t.inbox as SqliteInbox).handle(async (event: WebhookEvent, tx: unknown) => {
        await effect(tx, event.id);
      }) as never,
    });
    const body = eventJson(id);
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await send(body));
    return {
      statuses: replies.map((r) => r.status),
      codes: replies.map((r) => (r.json as { error?: { code?: string } })?.error?.code),
      effects: await t.effects(id),
    };
  }

  for (const { name, available, make } of TARGETS) {
    // Was broken, 3 of 3 on each database: what enqueue() answers 503 "kept nothing" (the claim's
    // INSERT kept no row and met none), handle() answered 409 delivery_in_progress on every retry,
    // though nothing held the event (a BEFORE trigger dropped its claim). Both now answer it by one
    // refusal (notKept in the inbox shell).
    it.runIf(available)(
      `${name}: a claim a BEFORE trigger drops is 503 'kept nothing', not 409 in progress`,
      async () => {
        const t = await make("dropSome");
        const result = await copiesTo(t, `evt_drop_${randomUUID()}`);
        expect(result).toMatchObject({ statuses: [503, 503, 503], effects: 0 });
      },
    );

    // Broken, 3 of 3 on each database: an AFTER trigger that deletes the claim's row leaves
    // handle() believing it claimed the id; the handler runs and commits for every copy (3 × 204,
    // the effect 3 times): no copy is ever a duplicate. A fix checks that the claim's row is there
    // before running the handler (read back in the transaction), and answers 503 when it is not.
    it.runIf(available).fails(`${name}: a claim an AFTER trigger deletes: the handler never runs twice`, async () => {
      const t = await make("remove");
      const id = `evt_remove_${randomUUID()}`;
      const result = await copiesTo(t, id);
      console.log(`${name}, handle(), claim deleted after insert: ${JSON.stringify(result)}`);
      expect(result.effects).toBeLessThanOrEqual(1);
    });
  }
});
