import { randomUUID } from "node:crypto";
import { type Client, createClient, type Transaction } from "@libsql/client";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// The handler's own transactions through libSQL's tx, on a real file: BEGIN, COMMIT and ROLLBACK
// sent with tx.execute become savepoints of the inbox's transaction; tx.commit(), tx.rollback()
// and tx.close(), which would end it, are refused. (better-sqlite3: faults.test.ts.)

const clients: Client[] = [];
afterAll(() => {
  for (const client of clients) client.close();
});

async function database(): Promise<Client> {
  const client = createClient({ url: `file:${databaseFile()}` });
  clients.push(client);
  await client.execute("pragma journal_mode = wal");
  await client.execute("create table effects (event_id text not null)");
  await new SqliteInbox(client, { scope: "setup" }).migrate();
  return client;
}
const insert = (tx: Transaction, id: string) =>
  tx.execute({ sql: "insert into effects (event_id) values (?)", args: [id] });
const effects = async (client: Client, id: string) =>
  Number(
    (await client.execute({ sql: "select count(*) as n from effects where event_id = ?", args: [id] })).rows[0]?.n,
  );
const event = (id: string) => ({ id, type: "flag.updated" }) as WebhookEvent;

describe("SqliteInbox on libSQL: the handler's own transactions through tx", () => {
  it("BEGIN … COMMIT through tx.execute is a savepoint: a throw after it leaves nothing, the retry writes once", async () => {
    const client = await database();
    let runs = 0;
    const onEvent = new SqliteInbox(client, { scope: "helper" }).handle(async (e, tx) => {
      runs++;
      await tx.execute("BEGIN");
      await insert(tx, e.id);
      await tx.execute("-- done\n COMMIT");
      if (runs === 1) throw new Error("fails after its COMMIT");
    });
    const id = `evt_${randomUUID()}`;
    await expect(onEvent(event(id))).rejects.toThrow("fails after its COMMIT");
    expect(await effects(client, id)).toBe(0);
    expect(await onEvent(event(id))).toBeUndefined();
    expect(await onEvent(event(id))).toMatchObject({ status: 204 });
    expect([runs, await effects(client, id)]).toEqual([2, 1]);
  });

  it("a ROLLBACK it catches, then more writes: the rolled-back part undone, the rest once", async () => {
    const client = await database();
    const onEvent = new SqliteInbox(client, { scope: "caught" }).handle(async (e, tx) => {
      await tx.executeMultiple(`begin; insert into effects (event_id) values ('${e.id}-undone')`);
      await tx.execute("rollback");
      await insert(tx, e.id);
    });
    const id = `evt_${randomUUID()}`;
    expect(await onEvent(event(id))).toBeUndefined();
    expect([await effects(client, id), await effects(client, `${id}-undone`)]).toEqual([1, 0]);
  });

  it("tx.commit(), tx.rollback() and tx.close() are refused, naming the call, and nothing commits", async () => {
    const client = await database();
    for (const end of ["commit", "rollback", "close"] as const) {
      const onEvent = new SqliteInbox(client, { scope: `refused-${end}` }).handle(async (e, tx) => {
        await insert(tx, e.id);
        await tx[end]();
      });
      const id = `evt_${randomUUID()}`;
      const failed = await onEvent(event(id)).catch((error: unknown) => error);
      expect((failed as Error).message).toMatch(`refused through the inbox's tx: tx.${end}(): `);
      expect((failed as Error).message).toMatch(/return to commit, throw to roll back/);
      expect(await effects(client, id)).toBe(0);
    }
  });

  it("statements as objects ({ sql, args }) and BEGIN's modes are savepoints too; tx.execute answers the step's result", async () => {
    const client = await database();
    let runs = 0;
    const answers: unknown[] = [];
    const onEvent = new SqliteInbox(client, { scope: "objects" }).handle(async (e, tx) => {
      runs++;
      answers.push(await tx.execute({ sql: "BEGIN IMMEDIATE", args: [] }));
      await insert(tx, e.id);
      await tx.execute({ sql: "commit", args: [] });
      answers.push(tx.closed);
      if (runs === 1) throw new Error("fails after its COMMIT");
    });
    const id = `evt_${randomUUID()}`;
    await expect(onEvent(event(id))).rejects.toThrow("fails after its COMMIT");
    expect(await effects(client, id)).toBe(0);
    expect(await onEvent(event(id))).toBeUndefined();
    expect([runs, await effects(client, id)]).toEqual([2, 1]);
    expect(answers[0]).toMatchObject({ rows: [], columns: [] });
    expect(answers[1]).toBe(false);
  });

  it("executeMultiple() and batch() write in the inbox's transaction; a batch with BEGIN, COMMIT or ROLLBACK is refused", async () => {
    const client = await database();
    const onEvent = new SqliteInbox(client, { scope: "multiple" }).handle(async (e, tx) => {
      await tx.executeMultiple(
        `insert into effects (event_id) values ('${e.id}-a'); insert into effects (event_id) values ('${e.id}-a')`,
      );
      await tx.executeMultiple(`begin deferred; insert into effects (event_id) values ('${e.id}-b'); end`);
      await tx.batch([{ sql: "insert into effects (event_id) values (?)", args: [`${e.id}-c`] }]);
      // SQLite's quotes: a COMMIT inside a quoted name is no statement.
      await tx.batch(["select 1 as `x;commit`", { sql: "select 1 as [y;rollback]" }]);
      if (e.id.startsWith("fail")) throw new Error("fails after its writes");
    });
    for (const id of [`evt_${randomUUID()}`, `fail_${randomUUID()}`]) {
      await onEvent(event(id)).catch(() => {});
      const counts = [
        await effects(client, `${id}-a`),
        await effects(client, `${id}-b`),
        await effects(client, `${id}-c`),
      ];
      expect(counts).toEqual(id.startsWith("fail") ? [0, 0, 0] : [2, 1, 1]);
    }
    for (const steps of [["BEGIN", "select 1"], [{ sql: "select 1" }, { sql: "COMMIT" }], ["rollback"]]) {
      const refused = new SqliteInbox(client, { scope: "batch-refused" }).handle(async (e, tx) => {
        await insert(tx, e.id);
        await tx.batch(steps as never);
      });
      const id = `evt_${randomUUID()}`;
      await expect(refused(event(id))).rejects.toThrow(
        "refused through the inbox's tx: a batch with BEGIN, COMMIT or ROLLBACK",
      );
      expect(await effects(client, id)).toBe(0);
    }
  });

  it("a BEGIN through tx.execute left open fails the handler: nothing commits, the retry runs it", async () => {
    const client = await database();
    let runs = 0;
    const onEvent = new SqliteInbox(client, { scope: "left-open" }).handle(async (e, tx) => {
      runs++;
      await insert(tx, e.id);
      if (runs === 1) await tx.execute("begin");
    });
    const id = `evt_${randomUUID()}`;
    await expect(onEvent(event(id))).rejects.toThrow();
    expect(await effects(client, id)).toBe(0);
    expect(await onEvent(event(id))).toBeUndefined();
    expect([runs, await effects(client, id)]).toEqual([2, 1]);
  });
});

describe("SqliteInbox on libSQL, attacked: a savepoint name the handler shares with the inbox", () => {
  // ROLLBACK TO the savepoint that marks the inbox's transaction would undo the inbox's own claim
  // of the id while the COMMIT still succeeds: every copy would run again. It is refused, as is a
  // RELEASE of it, so the delivery fails and nothing commits.
  it("ROLLBACK TO or RELEASE flag_webhooks_inbox is refused: nothing commits, and a retry runs the handler again", async () => {
    const client = await database();
    for (const statement of ["ROLLBACK TO flag_webhooks_inbox", "release savepoint flag_webhooks_inbox"]) {
      let runs = 0;
      const onEvent = new SqliteInbox(client, { scope: "mark" }).handle(async (e, tx) => {
        runs++;
        await tx.execute(statement);
        await insert(tx, e.id);
      });
      const id = `evt_${randomUUID()}`;
      await expect(onEvent(event(id))).rejects.toThrow(/the inbox's own/);
      await expect(onEvent(event(id))).rejects.toThrow(/the inbox's own/);
      expect([runs, await effects(client, id)]).toEqual([2, 0]);
    }
  });
});
