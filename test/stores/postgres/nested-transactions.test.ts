import { randomUUID } from "node:crypto";
import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers, type Send } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// A handler that reuses the ordinary node-postgres transaction helper (BEGIN; …; COMMIT, ROLLBACK
// on error) with the inbox's tx, against a real PostgreSQL through Express: its BEGIN, COMMIT and
// ROLLBACK become savepoints of the inbox's transaction, so the event id and every write commit
// once, together, when the delivery is answered 2xx. postgres.js, which has its own nested
// transactions (tx.savepoint), refuses them through tx.

const availability = postgresAvailability();
const SECRET = "whsec-nested-transactions";
const database = effectsDatabase(availability.available);
const { pool, effects, openTransactions } = database;
const { Query } = pg;
afterAll(closeReceivers);
const sqls: postgres.Sql[] = [];
afterAll(async () => {
  await Promise.all(sqls.map((sql) => sql.end()));
});

/** The transaction helper of node-postgres's docs ("Transactions"), taking the client it is given. */
async function inTransaction<T>(client: pg.PoolClient, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  await client.query("BEGIN");
  try {
    const value = await work(client);
    await client.query("COMMIT");
    return value;
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  }
}

const insert = (tx: pg.PoolClient, id: string) => tx.query("insert into effects (event_id) values ($1)", [id]);
/** Whether the inbox's row of `id` is committed, as another connection sees it. */
const committed = async (scope: string, id: string) =>
  Number(
    (await database.admin.query("select count(*) from flag_webhooks_inbox where scope = $1 and id = $2", [scope, id]))
      .rows[0].count,
  );

/** An Express receiver around `inbox.handle(handler)` on a pg Pool; errors it reports are kept in `errors`. */
function express(scope: string, handler: (id: string, tx: pg.PoolClient) => Promise<unknown>) {
  const errors: unknown[] = [];
  const inbox = new PostgresInbox(pool(4), { scope });
  const send = adapterReceiver("Express", {
    secret: SECRET,
    onError: (error) => void errors.push(error),
    onEvent: inbox.handle((event, tx) => handler(event.id, tx)),
  });
  return { errors, send: (id: string) => send.then((s: Send) => s(body(id))) };
}

describe.skipIf(!availability.available)("PostgresInbox: the handler's own transactions through tx (pg)", () => {
  it("node-postgres's transaction helper: its COMMIT commits nothing before the answer; the id and the writes commit once", async () => {
    const seen: number[] = [];
    const { send } = express("helper", async (id, tx) => {
      await inTransaction(tx, (c) => insert(c, id));
      // The helper's COMMIT is a savepoint released: nothing is committed yet.
      seen.push(await committed("helper", id), await effects(id));
    });
    const id = `evt_${randomUUID()}`;
    expect((await send(id)).status).toBe(204);
    expect(seen).toEqual([0, 0]);
    const copy = await send(id);
    expect([copy.status, copy.headers["webhook-duplicate"]]).toEqual([204, "true"]);
    expect([await committed("helper", id), await effects(id)]).toEqual([1, 1]);
    expect(await openTransactions()).toBe(0);
  });

  it("a throw after the helper's COMMIT: 500, nothing committed, and the retry runs the handler again", async () => {
    const runs = new Map<string, number>();
    const { send } = express("throw-after", async (id, tx) => {
      runs.set(id, (runs.get(id) ?? 0) + 1);
      await inTransaction(tx, (c) => insert(c, id));
      if (runs.get(id) === 1) throw new Error("fails after its COMMIT");
    });
    const id = `evt_${randomUUID()}`;
    expect((await send(id)).status).toBe(500);
    expect([await committed("throw-after", id), await effects(id)]).toEqual([0, 0]);
    expect((await send(id)).status).toBe(204);
    expect([runs.get(id), await effects(id)]).toEqual([2, 1]);
    expect((await send(id)).headers["webhook-duplicate"]).toBe("true");
  });

  // A query config that is a Submittable (pg's own Query, pg-cursor, pg-query-stream) sends its
  // text to the connection itself: its COMMIT would commit the event id and the writes mid-handler,
  // and the retry would be answered 204 as a duplicate without running the rest of the handler. Its
  // text is read as a string's is, and one that begins, commits or rolls back is refused (it cannot
  // be rewritten into savepoints): the refusal reaches it as an "error", as pg's own errors do.
  it("a COMMIT sent as a Submittable (pg.Query) then a throw: nothing committed, the effect once", async () => {
    const runs = new Map<string, number>();
    const heard: string[] = [];
    const { send } = express("submittable", async (id, tx) => {
      runs.set(id, (runs.get(id) ?? 0) + 1);
      await insert(tx, id);
      await new Promise((resolve) => {
        const query = tx.query(new Query("COMMIT")) as unknown as pg.Query;
        query.on("end", () => resolve(heard.push("end")));
        query.on("error", (error) => resolve(heard.push(error.message)));
      });
      if (runs.get(id) === 1) throw new Error("fails after its COMMIT");
    });
    const id = `evt_${randomUUID()}`;
    expect((await send(id)).status).toBe(500);
    expect(await send(id)).toMatchObject({ status: 204 });
    expect([runs.get(id), await effects(id)]).toEqual([2, 1]);
    expect(heard).toEqual([expect.stringMatching(/Submittable/), expect.stringMatching(/Submittable/)]);
  });

  it("a ROLLBACK the handler catches, then more writes: the rolled-back part undone, the rest once", async () => {
    const { send } = express("caught", async (id, tx) => {
      try {
        await inTransaction(tx, async (c) => {
          await insert(c, `${id}-undone`);
          // A statement that fails inside: the helper rolls back, as its docs say.
          await c.query("select 1/0");
        });
      } catch {
        // Best effort: the handler goes on.
      }
      await insert(tx, id);
    });
    const id = `evt_${randomUUID()}`;
    expect((await send(id)).status).toBe(204);
    expect((await send(id)).headers["webhook-duplicate"]).toBe("true");
    expect([await effects(id), await effects(`${id}-undone`)]).toEqual([1, 0]);
    expect(await openTransactions()).toBe(0);
  });

  it("nested helpers, COMMIT AND CHAIN, END and ABORT, in any case and with comments, are savepoints too", async () => {
    const { send } = express("spellings", async (id, tx) => {
      await tx.query("/* outer */ begin work");
      await inTransaction(tx, (c) => insert(c, `${id}-inner`));
      await tx.query("commit and chain");
      await insert(tx, `${id}-chained`);
      await tx.query("ABORT -- undone\n");
      await tx.query("start transaction");
      await insert(tx, id);
      await tx.query("End Transaction");
    });
    const id = `evt_${randomUUID()}`;
    expect((await send(id)).status).toBe(204);
    expect([await effects(id), await effects(`${id}-inner`), await effects(`${id}-chained`)]).toEqual([1, 1, 0]);
  });

  it("a COMMIT or ROLLBACK with no BEGIN before it is refused in the handler (500, rolled back), saying what to write", async () => {
    for (const statement of ["commit", "rollback"]) {
      const { errors, send } = express(`bare-${statement}`, async (id, tx) => {
        await insert(tx, id);
        await tx.query(statement);
      });
      const id = `evt_${randomUUID()}`;
      expect((await send(id)).status).toBe(500);
      expect(await effects(id)).toBe(0);
      expect(String((errors[0] as Error).message)).toMatch(/return to commit, throw to roll back/);
    }
    expect(await openTransactions()).toBe(0);
  });

  it("what cannot be a savepoint is refused: BEGIN with an isolation level, two-phase commit; a BEGIN never ended commits nothing", async () => {
    const statements = ["begin isolation level serializable", "prepare transaction 'x'", "begin"];
    for (const statement of statements) {
      const { errors, send } = express(`refused-${statements.indexOf(statement)}`, async (id, tx) => {
        await insert(tx, id);
        await tx.query(statement);
      });
      const id = `evt_${randomUUID()}`;
      expect((await send(id)).status, statement).toBe(500);
      expect(await effects(id)).toBe(0);
      expect(String((errors[0] as Error).message)).toMatch(/cannot|never ended/);
    }
  });

  it("the callback form of client.query, and a text of several statements, take the same savepoints", async () => {
    const { send } = express("callback", async (id, tx) => {
      await new Promise<void>((resolve, reject) => {
        tx.query("begin", (error: Error | null) => (error ? reject(error) : resolve()));
      });
      await insert(tx, id);
      await tx.query(`commit; begin; insert into effects (event_id) values ('${id}-undone'); rollback`);
    });
    const id = `evt_${randomUUID()}`;
    expect((await send(id)).status).toBe(204);
    expect([await effects(id), await effects(`${id}-undone`)]).toEqual([1, 0]);
  });
});

describe.skipIf(!availability.available)(
  "PostgresInbox: the handler's own transactions through tx (postgres.js)",
  () => {
    it("BEGIN or COMMIT through tx is refused, naming tx.savepoint; tx.savepoint nests as it should", async () => {
      const sql = postgres(database.url, { max: 4, onnotice: () => {} });
      sqls.push(sql);
      const errors: unknown[] = [];
      const inbox = new PostgresInbox(sql, { scope: "postgres-js" });
      const send = await adapterReceiver("Express", {
        secret: SECRET,
        onError: (error) => void errors.push(error),
        onEvent: inbox.handle(async (event, tx) => {
          if (event.id.startsWith("evt_begin")) await tx`begin`;
          if (event.id.startsWith("evt_unsafe")) await tx.unsafe("COMMIT");
          await tx.savepoint(async (sp) => {
            await sp`insert into effects (event_id) values (${event.id})`;
          });
        }),
      });
      for (const prefix of ["evt_begin", "evt_unsafe"]) {
        const id = `${prefix}_${randomUUID()}`;
        expect((await send(body(id))).status).toBe(500);
        expect(await effects(id)).toBe(0);
      }
      expect(errors.map((error) => String((error as Error).message))).toEqual([
        expect.stringMatching(/tx\.savepoint/),
        expect.stringMatching(/tx\.savepoint/),
      ]);
      const id = `evt_${randomUUID()}`;
      expect((await send(body(id))).status).toBe(204);
      expect(await effects(id)).toBe(1);
    });
  },
);
