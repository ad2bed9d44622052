import { randomUUID } from "node:crypto";
import { PostgresInbox } from "flag-webhooks/postgres";
import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attacked: pg's tx.query (src/stores/postgres/nested.ts) reads a query config's `text` to see
// whether it commits, then hands the config to pg, which reads `text` again. A config whose `text`
// is a getter answering COMMIT only to pg's own code is read as "select 1" and run as COMMIT: the
// inbox's transaction commits mid-handler, so a handler failing after it has its event recorded,
// and the copy is answered as a duplicate. (A String object in place of the text: pg refuses it,
// held. libSQL's statement objects: test/stores/sqlite/attack-statement-read-twice.test.ts.)

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
afterAll(closeReceivers);
const SECRET = "whsec-attack-statement-read-twice";

/** A query config whose text is COMMIT when pg reads it, "select 1" to anyone else. */
const twoFaced = () => ({
  get text() {
    return /node_modules[\\/]pg[\\/]/.test(new Error().stack ?? "") ? "commit" : "select 1";
  },
});

describe.skipIf(!availability.available)(
  "PostgresInbox on pg, attacked: a query config whose text reads otherwise to pg",
  () => {
    // Broke before its fix (now held): 1 of 1: 500 (the handler threw after the COMMIT), then the copy 204 as a duplicate,
    // the handler run once and its effect committed.
    it("a COMMIT behind a getter, then a throw: nothing commits, and the copy runs the handler again", async () => {
      const runs = new Map<string, number>();
      const inbox = new PostgresInbox(database.pool(2), { scope: "two-faced" });
      const send = await adapterReceiver("Express", {
        secret: SECRET,
        onEvent: inbox.handle(async (event, tx: pg.PoolClient) => {
          runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
          await tx.query(twoFaced()).catch(() => {});
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
  },
);
