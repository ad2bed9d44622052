import { randomUUID } from "node:crypto";
import { type Client, createClient, type Transaction } from "@libsql/client";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { databaseFile } from "../../support/sqlite.js";

// Attacked: the savepoint that marks the inbox's transaction (flag_webhooks_inbox) named through
// tx in the quoted forms SQLite reads as the same name ("…", […], `…`, '…'). The rule that refuses
// ROLLBACK TO or RELEASE of the inbox's savepoint (nested-transactions.test.ts, "a savepoint name
// the handler shares with the inbox") reads a quoted name as no name, so ROLLBACK TO it passes,
// undoes the inbox's claim of the id, and the COMMIT still succeeds: the delivery is answered 2xx
// with the id never recorded, and every copy runs the handler again.

const SECRET = "whsec-attack-quoted-mark";
const QUOTED = [
  'ROLLBACK TO "flag_webhooks_inbox"',
  "rollback to savepoint [flag_webhooks_inbox]",
  "rollback transaction to `flag_webhooks_inbox`",
  "rollback to 'flag_webhooks_inbox'",
];

const clients: { close(): void }[] = [];
afterAll(async () => {
  await closeReceivers();
  for (const client of clients) client.close();
});

/** The inbox's handle(), on whichever database: the handler gets its tx as it is. */
type Handle = (handler: (event: WebhookEvent, tx: unknown) => Promise<void>) => (event: WebhookEvent) => unknown;

async function inboxOn(db: unknown, scope: string): Promise<Handle> {
  const inbox = new SqliteInbox(db as Client, { scope });
  await inbox.migrate();
  return (handler) => inbox.handle(handler as never);
}

/** A database with an effects table and the inbox's, on libSQL or better-sqlite3, and how to write through each's tx. */
const drivers = {
  libSQL: async () => {
    const client: Client = createClient({ url: `file:${databaseFile()}` });
    clients.push(client);
    await client.execute("pragma journal_mode = wal");
    await client.execute("create table effects (event_id text not null)");
    const count = async (id: string) =>
      Number(
        (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
      );
    const run = async (tx: unknown, statement: string, id: string) => {
      const t = tx as Transaction;
      await t.execute(statement);
      await t.execute({ sql: "insert into effects (event_id) values (?)", args: [id] });
    };
    return { db: client as unknown, count, run };
  },
  "better-sqlite3": async () => {
    const db = new Database(databaseFile());
    clients.push(db);
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
    const count = async (id: string) =>
      (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n;
    const run = async (tx: unknown, statement: string, id: string) => {
      const t = tx as Database.Database;
      t.exec(statement);
      t.prepare("insert into effects (event_id) values (?)").run(id);
    };
    return { db: db as unknown, count, run };
  },
};

describe.each(Object.entries(drivers))(
  "SqliteInbox on %s, attacked: ROLLBACK TO the inbox's savepoint, quoted",
  (_name, make) => {
    // Broke before its fix (now held): 4 of 4 quoted forms on each driver: both deliveries answered 200, the handler ran
    // twice and wrote its effect twice (over Express, real HTTP).
    it.each(QUOTED)("%s: refused, or the copy is a duplicate and the effect is written once", async (statement) => {
      const { db, count, run } = await make();
      const handle = await inboxOn(db, "quoted-mark");
      let runs = 0;
      const send = await adapterReceiver("Express", {
        secret: SECRET,
        onEvent: handle(async (event, tx) => {
          runs++;
          await run(tx, statement, event.id);
        }),
      });
      const id = `evt_${randomUUID()}`;
      const first = await send(eventJson(id));
      const copy = await send(eventJson(id));
      const effects = await count(id);
      // Either the statement is refused (nothing 2xx, nothing written) or it is harmless (handled once).
      const refused = first.status >= 500 && effects === 0;
      const once = first.status === 200 && copy.headers["webhook-duplicate"] === "true" && runs === 1 && effects === 1;
      expect(refused || once, JSON.stringify({ first: first.status, copy: copy.status, runs, effects })).toBe(true);
    });

    // Held: a quoted RELEASE of it leaves the inbox's own RELEASE at COMMIT failing, so nothing
    // commits and the delivery is not answered 2xx (extends the unquoted case of nested-transactions.test.ts).
    it('release "flag_webhooks_inbox": no 2xx, nothing written, the retry runs the handler again', async () => {
      const { db, count, run } = await make();
      const handle = await inboxOn(db, "quoted-release");
      let runs = 0;
      const send = await adapterReceiver("Express", {
        secret: SECRET,
        onEvent: handle(async (event, tx) => {
          runs++;
          await run(tx, 'release "flag_webhooks_inbox"', event.id);
        }),
      });
      const id = `evt_${randomUUID()}`;
      const answers = [(await send(eventJson(id))).status, (await send(eventJson(id))).status];
      expect([answers.every((status) => status >= 500), runs, await count(id)]).toEqual([true, 2, 0]);
    });
  },
);
