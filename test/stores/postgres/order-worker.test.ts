import { PostgresInbox } from "flag-webhooks/postgres";
import type pg from "pg";
import type { KeepingInbox } from "../../support/keep-then-work.js";
import { MIRROR_ROWS, MIRROR_TABLE, snapshotOf } from "../../support/order-mirror.js";
import { describeOrderedWorker } from "../../support/order-worker.js";
import { effectsDatabase } from "../../support/postgres-effects.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Ordered delivery through keep-then-work on a real PostgreSQL (pg): the worker reads and writes
// the flag's positions in each attempt's transaction, with the handler's mirror rows.

const availability = postgresAvailability();
const database = effectsDatabase(availability.available);
let made = false;

describeOrderedWorker(
  "Postgres over pg",
  async () => {
    const pool = database.pool(6);
    return {
      async inbox(scope, now, handleStale = false) {
        const inbox = new PostgresInbox(pool, { scope, now, order: { handleStale } });
        if (!made) {
          await inbox.migrate();
          await database.admin.query(MIRROR_TABLE);
          made = true;
        }
        return inbox as unknown as KeepingInbox;
      },
      exec: (tx, sql, params) => (tx as pg.PoolClient).query(sql, params),
      mirror: async (scope) => snapshotOf((await database.admin.query(MIRROR_ROWS, [scope])).rows),
    };
  },
  { runs: 60, ...(availability.available ? {} : { skip: availability.reason }) },
);
