import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresInbox } from "flag-webhooks/postgres";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attacked: postgres.js's tx (src/stores/postgres/nested.ts refuses a statement that begins,
// commits or rolls back, tagged or through unsafe; nested-transactions.test.ts) through the ways
// postgres.js runs a text the refusal does not read: a file of SQL (tx.file), a text given as a
// String object, and a text whose strings Postgres ends elsewhere than the reading does
// (attack-backslash-strings.test.ts, on pg), run with .simple(). Each COMMIT commits the inbox's
// transaction mid-handler: a handler that fails after it is answered 500, yet the event id and its
// effect are committed, and the copy is answered as a duplicate, the handler never run again.

const availability = postgresAvailability();
const SECRET = "whsec-attack-postgres-js-tx";
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);
const sqls: postgres.Sql[] = [];
afterAll(async () => {
  await Promise.all(sqls.map((sql) => sql.end()));
});
const results = fileURLToPath(new URL("../../../.test-results/", import.meta.url));
mkdirSync(results, { recursive: true });
const file = join(mkdtempSync(join(results, "attack-postgres-js-")), "commit.sql");
writeFileSync(file, "commit");

type Tx = postgres.TransactionSql;
const COMMITS: [string, (tx: Tx) => Promise<unknown>][] = [
  ["tx.file() of a file holding COMMIT", async (tx) => tx.file(file)],
  ["tx.unsafe() of COMMIT as a String object", async (tx) => tx.unsafe(new String("commit") as unknown as string)],
  [
    "tx.unsafe().simple() of a COMMIT after '\\'' with standard_conforming_strings off",
    async (tx) => {
      await tx.unsafe("set local standard_conforming_strings = off");
      return tx.unsafe("select '\\'' as a; commit; select 'x' as b --'").simple();
    },
  ],
];

describe.skipIf(!availability.available)("PostgresInbox on postgres.js, attacked: a COMMIT tx does not read", () => {
  // Broke before its fix (now held): 3 of 3 ways, 1 of 1 delivery each: 500, then the copy 204 as a duplicate, the handler
  // run once and its effect committed.
  it.each(COMMITS)("%s, then a handler that fails: nothing commits, the copy runs it again", async (name, commit) => {
    const sql = postgres(database.url, { max: 2, onnotice: () => {} });
    sqls.push(sql);
    const runs = new Map<string, number>();
    const inbox = new PostgresInbox(sql, { scope: `postgres-js-${COMMITS.findIndex(([n]) => n === name)}` });
    const send = await adapterReceiver("Express", {
      secret: SECRET,
      onEvent: inbox.handle(async (event, tx) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        await tx`insert into effects (event_id) values (${event.id})`;
        await commit(tx as unknown as Tx).catch(() => {});
        if (runs.get(event.id) === 1) throw new Error("fails after the COMMIT");
      }),
    });
    const id = `evt_${randomUUID()}`;
    const first = (await send(body(id))).status;
    const copy = await send(body(id));
    expect([first, copy.headers["webhook-duplicate"], runs.get(id), await database.effects(id)]).toEqual([
      500,
      undefined,
      2,
      1,
    ]);
  });
});
