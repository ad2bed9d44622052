import { randomUUID } from "node:crypto";
import { type Client, createClient, type Transaction } from "@libsql/client";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// Attacked: libSQL's tx.execute (src/stores/sqlite/nested.ts) reads a statement object's `sql` to
// see whether it commits, then hands the object to libSQL, which reads `sql` again. A statement
// whose `sql` is a getter answering otherwise the second time (a lazily built statement, or a
// hostile one) is read as "select 1" and run as COMMIT: the inbox's transaction commits
// mid-handler, so a handler failing after it has its event recorded, and the copy is answered as
// a duplicate. (A String object in its place is refused by libSQL and better-sqlite3: held.)

const clients: Client[] = [];
afterAll(() => {
  for (const client of clients) client.close();
});
const event = (id: string) => ({ id, type: "flag.updated" }) as WebhookEvent;

describe("SqliteInbox on libSQL, attacked: a statement whose sql reads otherwise the second time", () => {
  // Broke before its fix (now held): 1 of 1: the handler threw after the COMMIT, yet the copy is answered 204 as a duplicate
  // and the handler ran once, its effect committed.
  it("a COMMIT behind a getter, then a throw: nothing commits, and the copy runs the handler again", async () => {
    const client = createClient({ url: `file:${databaseFile()}` });
    clients.push(client);
    await client.execute("create table effects (event_id text not null)");
    let runs = 0;
    const inbox = new SqliteInbox(client, { scope: "getter" });
    await inbox.migrate();
    const onEvent = inbox.handle(async (e, tx: Transaction) => {
      runs++;
      await tx.execute({ sql: "insert into effects (event_id) values (?)", args: [e.id] });
      let reads = 0;
      await tx.execute({
        get sql() {
          return reads++ === 0 ? "select 1" : "commit";
        },
        args: [],
      });
      if (runs === 1) throw new Error("fails after the COMMIT");
    });
    const id = `evt_${randomUUID()}`;
    await expect(onEvent(event(id))).rejects.toThrow("fails after the COMMIT");
    const copy = await onEvent(event(id)).catch((error: unknown) => error);
    const effects = Number(
      (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
    );
    expect([copy, runs, effects]).toEqual([undefined, 2, 1]);
  });
});
