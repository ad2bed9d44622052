import { randomUUID } from "node:crypto";
import { PostgresInbox } from "flag-webhooks/postgres";
import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attacked: the reading of a handler's text through tx (src/stores/nested-transactions.ts) takes
// a string's backslash as a character, as Postgres does by default (standard_conforming_strings
// on). A handler may turn that setting off for its session (SET, or set_config()): Postgres then
// reads '\'' as a string holding a quote, while the reading ends the string at the second quote
// and takes what follows for more string, so a COMMIT after it is sent as it is. It commits the
// inbox's transaction mid-handler: the event id and the writes before it are committed although
// the handler then fails, and every copy is answered as a duplicate, the rest never run.

const availability = postgresAvailability();
const SECRET = "whsec-attack-backslash-strings";
const database = effectsDatabase(availability.available);
const { pool, effects } = database;
afterAll(closeReceivers);

/** Postgres reads: a string "'", then COMMIT, then a string "x"; the reading sees no COMMIT. */
const HIDDEN_COMMIT = "select '\\'' as a; commit; select 'x' as b --'";

describe.skipIf(!availability.available)(
  "PostgresInbox on pg, attacked: a COMMIT after a backslash-escaped quote",
  () => {
    // Broke: 1 of 1: the first delivery is answered 500 (the handler threw), yet the event id and
    // the effect are committed; the copy is answered 204 as a duplicate and the handler never runs again.
    it.fails("with standard_conforming_strings off, a handler that fails after it: nothing commits, the copy runs it again", async () => {
      const runs = new Map<string, number>();
      const inbox = new PostgresInbox(pool(2), { scope: "backslash" });
      const send = await adapterReceiver("Express", {
        secret: SECRET,
        onEvent: inbox.handle(async (event, tx: pg.PoolClient) => {
          runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
          // Only for this transaction: the connection goes back to the pool as it was.
          await tx.query("set local standard_conforming_strings = off");
          await tx.query("insert into effects (event_id) values ($1)", [event.id]);
          await tx.query(HIDDEN_COMMIT);
          if (runs.get(event.id) === 1) throw new Error("fails after the hidden COMMIT");
        }),
      });
      const id = `evt_${randomUUID()}`;
      const first = (await send(body(id))).status;
      const copy = await send(body(id));
      // The COMMIT refused (the copy fails too, nothing written) or made a savepoint (the copy is
      // handled, its effect once): either way the copy runs the handler, and is no duplicate.
      const written = copy.status === 204 ? 1 : 0;
      expect([first, copy.headers["webhook-duplicate"], runs.get(id), await effects(id)]).toEqual([
        500,
        undefined,
        2,
        written,
      ]);
    });
  },
);
