import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { deliverUntilOk, newTally } from "../../support/crash.js";
import { eventJson, statusOf } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { KEEP_CRASH_SECRET, startKeepProcess } from "../../support/keep-crash.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";
import { commitCounting, databaseFile } from "../../support/sqlite.js";

// Group commit on the receiving side of keep-then-work: deliveries that arrive while a COMMIT is
// in flight are kept together by the next one, each still answered from its own row (202 new,
// 204 a copy, 409 an id a claim holds), a batch whose COMMIT fails kept again one delivery at a
// time, so only the refused one is answered 503. Commits are counted where they happen: by Postgres (the transaction id each kept row
// was inserted in, noted by a trigger) and on SQLite by the connection the inbox is given, its
// COMMITs counted as they run. A COMMIT is made to fail by a deferred check that fails at COMMIT.

const SECRET = "whsec-group-commit";
const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
/**
 * The advisory lock a row whose id starts with evt_gate waits for, on Postgres, while a test holds
 * it; one whose id starts with evt_batch waits for the next one. Polled (the statement sleeps), not
 * waited for as a lock: the inbox bounds its keep statement's lock waits (lock_timeout), which
 * would cut the wait.
 */
const GATE = 4242;

beforeAll(async () => {
  if (!availability.available) return;
  await database.admin.query(`
    create table kept_in (scope text not null, id text not null, xid bigint not null);
    create function wait_gate(gate bigint) returns void language plpgsql as $$ begin
      while not pg_try_advisory_xact_lock_shared(gate) loop perform pg_sleep(0.005); end loop;
    end $$;
    create function note_kept() returns trigger language plpgsql as $$ begin
      insert into kept_in values (new.scope, new.id, txid_current());
      if new.id like 'evt_gate%' then perform wait_gate(${GATE}); end if;
      if new.id like 'evt_batch%' then perform wait_gate(${GATE + 1}); end if;
      return new;
    end $$;
    create trigger note_kept after insert on flag_webhooks_inbox for each row execute function note_kept();
    create function refuse_poison() returns trigger language plpgsql as $$ begin
      if new.id like 'evt_poison%' then raise exception 'refused at COMMIT'; end if;
      return null;
    end $$;
    create constraint trigger refuse_poison after insert on flag_webhooks_inbox
      deferrable initially deferred for each row execute function refuse_poison();`);
}, 60_000);
afterAll(async () => {
  await closeReceivers();
});

type Inbox = PostgresInbox<never> | SqliteInbox;

/** One database under test. */
interface Subject {
  inbox(scope: string): Inbox;
  /** How many COMMITs kept rows of `scope` (Postgres), or ran on the inbox's connection (SQLite). */
  commits(scope: string): Promise<number>;
  /** Holds the next COMMIT of the inbox in flight until the returned function is called. */
  hold(): Promise<() => Promise<void>>;
  /** The id of a delivery whose row the COMMIT waits for while held (Postgres: ids of evt_gate). */
  gated(): string;
  /** The rows of `scope`. */
  rows(scope: string): Promise<{ id: string; state: string }[]>;
}

const postgresSubject = (pool: () => unknown): Subject => ({
  inbox: (scope) => new PostgresInbox(pool() as never, { scope }) as PostgresInbox<never>,
  async commits(scope) {
    const { rows } = await database.admin.query("select count(distinct xid)::int as n from kept_in where scope = $1", [
      scope,
    ]);
    return rows[0].n;
  },
  async hold() {
    const client = await database.admin.connect();
    await client.query("select pg_advisory_lock($1)", [GATE]);
    return async () => {
      await client.query("select pg_advisory_unlock($1)", [GATE]);
      client.release();
    };
  },
  gated: () => `evt_gate_${randomUUID()}`,
  async rows(scope) {
    return (await database.admin.query("select id, state from flag_webhooks_inbox where scope = $1", [scope])).rows;
  },
});

const subjects: [string, () => Promise<Subject>, string | undefined][] = [
  [
    "Postgres over pg",
    async () => {
      const made = database.pool(6);
      return postgresSubject(() => made);
    },
    availability.available ? undefined : availability.reason,
  ],
  [
    "Postgres over postgres.js",
    async () => {
      const sql = postgres(database.url, { max: 6, onnotice: () => {} });
      afterAll(() => sql.end());
      return postgresSubject(() => sql);
    },
    availability.available ? undefined : availability.reason,
  ],
  ["SQLite over better-sqlite3", sqliteSubject, undefined],
];

/**
 * A SQLite file (WAL), its inboxes on one connection whose COMMITs are counted as they run, a
 * second connection that holds the write lock (the first COMMIT waits for it), and a deferred
 * foreign key that fails the COMMIT of a row whose id starts with evt_poison.
 */
async function sqliteSubject(): Promise<Subject> {
  const file = databaseFile();
  const db = new Database(file);
  db.pragma("journal_mode = wal");
  db.pragma("foreign_keys = on");
  const other = new Database(file);
  afterAll(() => {
    db.close();
    other.close();
  });
  await new SqliteInbox(db, { scope: "setup" }).migrate();
  db.exec(`create table parents (id text primary key);
    create table children (parent_id text references parents (id) deferrable initially deferred);
    create trigger refuse_poison after insert on flag_webhooks_inbox when new.id like 'evt_poison%'
      begin insert into children values ('none'); end;`);
  const { connection, commits } = commitCounting(db);
  return {
    inbox: (scope) => new SqliteInbox(connection, { scope }),
    commits: async () => commits(),
    async hold() {
      other.exec("begin immediate");
      return async () => void other.exec("rollback");
    },
    gated: () => `evt_gate_${randomUUID()}`,
    rows: async (scope) =>
      db.prepare("select id, state from flag_webhooks_inbox where scope = ?").all(scope) as {
        id: string;
        state: string;
      }[],
  };
}

const eventOf = (id: string) => createEvent("flag.updated", { id }) as WebhookEvent;
const newId = () => `evt_${randomUUID()}`;

describe.each(subjects)("group commit of enqueue(): %s", (_name, make, skip) => {
  let subject: Promise<Subject> | undefined;
  const subjectOf = () => {
    subject ??= make();
    return subject;
  };

  it.skipIf(skip !== undefined)(
    "32 deliveries at once make 2 COMMITs (the first alone, at once; the others together), each answered from its own row",
    async () => {
      const s = await subjectOf();
      const scope = `gc-${randomUUID().slice(0, 8)}`;
      const inbox = s.inbox(scope);
      await inbox.migrate();
      const keep = inbox.enqueue();
      const [there, held, copied] = [newId(), newId(), newId()];
      expect(await statusOf(keep(eventOf(there)))).toBe(202);
      expect(await inbox.claim(held, 60_000)).toBe("claimed");
      const before = await s.commits(scope);
      const fresh = Array.from({ length: 28 }, newId);
      const ids = [fresh[0] as string, there, held, copied, copied, ...fresh.slice(1)];
      expect(ids).toHaveLength(32);
      const statuses = await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))));
      expect(statuses).toEqual([202, 204, 409, 202, 204, ...fresh.slice(1).map(() => 202)]);
      expect((await s.commits(scope)) - before).toBe(2);
      const rows = await s.rows(scope);
      // One row each: the 27 new, the copied one once, the one there before, and the claim's.
      expect(rows).toHaveLength(31);
      expect(rows.filter((row) => row.id === copied)).toEqual([{ id: copied, state: "pending" }]);
      expect(rows.find((row) => row.id === held)?.state).toBe("claimed");
      const ran: string[] = [];
      const worker = inbox.work(
        (event) => {
          ran.push(event.id);
        },
        { interval: false, concurrency: 1 },
      );
      while ((await worker.drain()) > 0);
      await worker.close();
      expect(ran.sort()).toEqual([...fresh, there, copied].sort());
    },
    60_000,
  );

  it.skipIf(skip !== undefined)(
    "a batch whose COMMIT fails is kept again one by one: only the refused delivery is answered 503 with Retry-After, the others that shared its COMMIT 202",
    async () => {
      const s = await subjectOf();
      const scope = `gc-${randomUUID().slice(0, 8)}`;
      const inbox = s.inbox(scope);
      await inbox.migrate();
      const send = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
      const keep = inbox.enqueue();
      const first = newId();
      const batch = [newId(), newId(), `evt_poison_${randomUUID()}`, newId()];
      const statuses = await Promise.all([first, ...batch].map((id) => statusOf(keep(eventOf(id)))));
      expect(statuses).toEqual([202, 202, 202, 503, 202]);
      const innocent = [first, ...batch.filter((id) => !id.startsWith("evt_poison"))];
      expect((await s.rows(scope)).map((row) => row.id).sort()).toEqual([...innocent].sort());
      // Through a receiver: the refused COMMIT is a 503 store_unavailable with Retry-After.
      const refused = await send(eventJson(`evt_poison_${randomUUID()}`));
      expect(refused.status).toBe(503);
      expect(refused.json?.error?.code).toBe("store_unavailable");
      expect(refused.headers["retry-after"]).toBeDefined();
      // Their copies are copies: each was kept once.
      const copies = await Promise.all(innocent.map(eventOf).map((event) => statusOf(keep(event))));
      expect(copies).toEqual([204, 204, 204, 204]);
    },
    60_000,
  );

  it.skipIf(skip !== undefined)(
    "over HTTP, deliveries that arrive while a COMMIT is held in flight share the next: fewer COMMITs than deliveries, all 202",
    async () => {
      const s = await subjectOf();
      const scope = `gc-${randomUUID().slice(0, 8)}`;
      const inbox = s.inbox(scope);
      await inbox.migrate();
      const send = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
      const before = await s.commits(scope);
      const release = await s.hold();
      const ids = [s.gated(), ...Array.from({ length: 31 }, newId)];
      const first = send(eventJson(ids[0] as string));
      // What arrives while the first COMMIT waits goes into the next; how many arrive is the
      // machine's, and the assertion holds as soon as two of them share one COMMIT.
      await sleep(100);
      const rest = ids.slice(1).map((id) => send(eventJson(id)));
      await sleep(300);
      await release();
      const replies = await Promise.all([first, ...rest]);
      expect(replies.map((reply) => reply.status)).toEqual(ids.map(() => 202));
      const commits = (await s.commits(scope)) - before;
      expect(commits).toBeLessThan(ids.length);
      expect((await s.rows(scope)).length).toBe(ids.length);
    },
    60_000,
  );

  it.skipIf(skip !== undefined)("groupCommit: false keeps each delivery in a COMMIT of its own", async () => {
    const s = await subjectOf();
    const scope = `gc-${randomUUID().slice(0, 8)}`;
    const inbox = s.inbox(scope);
    await inbox.migrate();
    const keep = inbox.enqueue({ groupCommit: false });
    const before = await s.commits(scope);
    const ids = Array.from({ length: 8 }, newId);
    expect(await Promise.all(ids.map((id) => statusOf(keep(eventOf(id)))))).toEqual(ids.map(() => 202));
    expect((await s.commits(scope)) - before).toBe(8);
  });
});

describe.skipIf(!availability.available)("group commit through a crash (Postgres, pg)", () => {
  /** Waits until a statement of the inbox waits at a gate (polling its advisory lock), its text matching `like`. */
  const waiting = async (like: string) => {
    for (let tries = 0; tries < 400; tries++) {
      const { rows } = await database.admin.query(
        "select count(*)::int as n from pg_stat_activity where wait_event = 'PgSleep' and query like $1",
        [like],
      );
      if (rows[0].n > 0) return;
      await sleep(25);
    }
    const { rows } = await database.admin.query(
      "select wait_event, left(query, 120) as q from pg_stat_activity where datname = current_database()",
    );
    throw new Error(`no statement like ${like} came to wait for the lock: ${JSON.stringify(rows)}`);
  };

  it("a receiver SIGKILLed while a batch's COMMIT is in flight answered none of it 2xx, lost nothing it answered, and the retries keep each once", async () => {
    const port = await freePort();
    const env = { DATABASE_URL: database.url };
    let receiver = await startKeepProcess("receiver", port, env);
    const holder = await database.admin.connect();
    try {
      await holder.query("select pg_advisory_lock($1), pg_advisory_lock($2)", [GATE, GATE + 1]);
      const tally = newTally();
      const once = (id: string) =>
        deliverUntilOk(() => port, eventJson(id), KEEP_CRASH_SECRET, tally, { attempts: 1 }).then(
          () => true,
          () => false,
        );
      const first = `evt_gate_${randomUUID()}`;
      const batch = Array.from({ length: 12 }, () => `evt_batch_${randomUUID()}`);
      const firstAnswered = once(first);
      await waiting("%insert into%");
      const batchAnswered = batch.map(once);
      await sleep(300);
      // The first COMMIT ends (202); the next, holding the batch, waits inside its statement.
      await holder.query("select pg_advisory_unlock($1)", [GATE]);
      expect(await firstAnswered).toBe(true);
      await waiting("%json_to_recordset%");
      await receiver.kill();
      expect(await Promise.all(batchAnswered)).toEqual(batch.map(() => false));
      await holder.query("select pg_advisory_unlock($1)", [GATE + 1]);
      // What was answered 2xx is there; the sender's retries keep the others, each once.
      const kept = async () =>
        (await database.admin.query("select id from flag_webhooks_inbox where scope = 'keep-crash'")).rows.map(
          (row) => row.id as string,
        );
      expect(await kept()).toContain(first);
      receiver = await startKeepProcess("receiver", port, env);
      await Promise.all(batch.map((id) => deliverUntilOk(() => port, eventJson(id), KEEP_CRASH_SECRET, tally)));
      const ids = await kept();
      for (const id of [first, ...batch]) expect(ids.filter((one) => one === id)).toEqual([id]);
    } finally {
      await holder.query("select pg_advisory_unlock_all()");
      holder.release();
      await receiver.stop();
    }
  }, 90_000);
});
