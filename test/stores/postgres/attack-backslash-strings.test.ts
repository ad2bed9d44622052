import { randomUUID } from "node:crypto";
import { PostgresInbox } from "flag-webhooks/postgres";
import type pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { adapterReceiver, closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Attacked: the reading of a handler's text through tx (src/stores/nested-transactions.ts) reads
// strings as Postgres does by default. A handler may change, for its transaction, a setting that
// changes where Postgres ends a string (standard_conforming_strings; the client encoding, whose
// bytes Postgres converts before it reads the text), and a COMMIT the reading takes for part of a
// string is sent as it is. It commits the inbox's transaction mid-handler: the event id and the
// writes before it are committed although the handler then fails, and every copy is answered as a
// duplicate, the rest never run.

const availability = postgresAvailability();
const SECRET = "whsec-attack-backslash-strings";
const database = effectsDatabase(availability.available);
const { pool, effects } = database;
afterAll(closeReceivers);

/**
 * Each setting a handler may change for its transaction, and a text in which Postgres, so set,
 * reads a COMMIT that the reading does not: with standard_conforming_strings off, '\'' is a string
 * holding a quote; with the client encoding SJIS, the bytes of "Á" (C3 81) and the backslash after
 * them (5C) are two SJIS characters, so the backslash escapes nothing and the E-string ends there.
 */
const HIDDEN: [string, string][] = [
  ["set local standard_conforming_strings = off", "select '\\'' as a; commit; select 'x' as b --'"],
  ["set local client_encoding = 'SJIS'", "select E'\u00c1\\'; commit; select 1 as x -- '"],
];

describe.skipIf(!availability.available)(
  "PostgresInbox on pg, attacked: a COMMIT the reading takes for part of a string",
  () => {
    // Broke before its fix (now held): 2 of 2 settings, 1 of 1 delivery each: the first is answered 500 (the handler threw),
    // yet the event id and the effect are committed; the copy is answered 204 as a duplicate and
    // the handler never runs again.
    it.each(HIDDEN)(
      "%s, then a handler that fails after it: nothing commits, the copy runs it again",
      async (setting, text) => {
        const runs = new Map<string, number>();
        const inbox = new PostgresInbox(pool(2), { scope: "hidden-commit" });
        const send = await adapterReceiver("Express", {
          secret: SECRET,
          onEvent: inbox.handle(async (event, tx: pg.PoolClient) => {
            runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
            // Only for this transaction: the connection goes back to the pool as it was.
            await tx.query(setting);
            await tx.query("insert into effects (event_id) values ($1)", [event.id]);
            await tx.query(text);
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
      },
    );
  },
);
