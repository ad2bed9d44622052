import { PostgresInbox } from "flag-webhooks/postgres";
import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attacked: signed ids built to meet in Postgres (hostile-input.test.ts sends such ids to the
// SQLite inbox and the memory store): NUL, which Postgres text cannot hold; ids equal up to
// Unicode normalization; LIKE's wildcards and escape; a byte-order mark; an id one byte either side
// of the 1 KiB past which stores hash it; names of Object.prototype. Held: each is handled once,
// on its own, and its copy is a duplicate.

const availability = postgresAvailability();
const SECRET = "whsec-attack-odd-ids";
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);

const IDS = [
  "evt_a",
  "evt_a\u0000",
  "evt_a\u0000b",
  "\u0000",
  "caf\u00e9",
  "cafe\u0301",
  "evt_a%",
  "evt_a_",
  "evt_a\\",
  "\ufeffevt_a",
  "evt_\u2028",
  "x".repeat(1024),
  "x".repeat(1025),
  "__proto__",
  "constructor",
];

describe.skipIf(!availability.available)("PostgresInbox, attacked: ids built to meet", () => {
  it("each is handled once, on its own, over fetch: the second round is all duplicates", async () => {
    const runs = new Map<string, number>();
    const inbox = new PostgresInbox(database.pool(2), { scope: "odd-ids" });
    const send = await adapterReceiver("fetch", {
      secret: SECRET,
      onEvent: inbox.handle(async (event, tx: pg.PoolClient) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        // As JSON: the effects table is Postgres text too, which holds no NUL.
        await tx.query("insert into effects (event_id) values ($1)", [JSON.stringify(event.id)]);
      }),
    });
    for (const round of [1, 2]) {
      for (const id of IDS) {
        const answer = await send(body(id));
        expect([id, answer.status, answer.headers["webhook-duplicate"]]).toEqual([
          id,
          204,
          round === 1 ? undefined : "true",
        ]);
      }
    }
    expect(IDS.map((id) => runs.get(id))).toEqual(IDS.map(() => 1));
    const rows = (await database.admin.query("select event_id, count(*)::int as n from effects group by event_id"))
      .rows as { event_id: string; n: number }[];
    expect(rows.map((row) => JSON.parse(row.event_id)).sort()).toEqual([...IDS].sort());
    expect(rows.every((row) => row.n === 1)).toBe(true);
  });
});
