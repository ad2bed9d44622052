import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventJson, signedHeaders } from "../../support/deliveries.js";
import { close, listen, post } from "../../support/http.js";
import {
  type PostgresServer,
  postgresAvailability,
  startPostgres,
  stopPostgres,
} from "../../support/postgres-server.js";

// Attack on group commit under faults, over real HTTP: senders that hang up while their batch's
// COMMIT waits, and Postgres SIGKILLed (then restarted) while a batch's COMMIT waits. What must
// hold: no 2xx for a row that is not there after the restart, and every event kept once in the
// end, its retries answered as copies.

const SECRET = "whsec-attack-batch-faults";
const GATE = 5151;
const availability = postgresAvailability();

describe.skipIf(!availability.available)("group commit under faults (Postgres, pg, Express)", () => {
  let server: PostgresServer | undefined;
  let pool: pg.Pool;
  let admin: pg.Pool;
  let http: Server;
  const inboxOf = () => new PostgresInbox(pool, { scope: "faults", timeout: "3s", lockTimeout: "1s" });

  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 6 });
    admin = new pg.Pool({ connectionString: server.url, max: 2 });
    // Connections the SIGKILL cuts while idle: the pool reports them here, as an app must let it.
    pool.on("error", () => {});
    admin.on("error", () => {});
    const inbox = inboxOf();
    await inbox.migrate();
    await admin.query(`
      create function gate_batch() returns trigger language plpgsql as $$ begin
        if new.id like 'evt_gate%' or new.id like 'evt_batch%' then perform pg_advisory_xact_lock_shared(${GATE}); end if;
        return new;
      end $$;
      create trigger gate_batch before insert on flag_webhooks_inbox for each row execute function gate_batch();`);
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, onEvent: inbox.enqueue(), onError: () => {} }));
    http = await listen(createServer(app));
  }, 60_000);
  afterAll(async () => {
    await close(http);
    await pool?.end().catch(() => {});
    await admin?.end().catch(() => {});
    await stopPostgres(server);
  });

  const deliver = async (id: string, signal?: AbortSignal) => {
    const body = eventJson(id);
    try {
      return (await post(http, { body, headers: await signedHeaders(SECRET, body) }, { signal })).status;
    } catch {
      return 0; // hung up, or the connection broke
    }
  };
  const keptIds = async () =>
    (await admin.query("select id from flag_webhooks_inbox where scope = 'faults'")).rows.map(
      (row) => row.id as string,
    );
  const waitingOnGate = async () => {
    for (let tries = 0; tries < 200; tries++) {
      const { rows } = await admin.query(
        "select count(*)::int as n from pg_stat_activity where wait_event = 'advisory' and query like '%insert into%'",
      );
      if (rows[0].n > 0) return;
      await sleep(25);
    }
    throw new Error("no INSERT came to wait on the gate");
  };

  it("senders that hang up while their batch's COMMIT waits: their rows are kept, and their retries are copies", async () => {
    const holder = await admin.connect();
    try {
      await holder.query("select pg_advisory_lock($1)", [GATE]);
      const first = `evt_gate_${randomUUID()}`;
      const ids = Array.from({ length: 20 }, () => `evt_batch_${randomUUID()}`);
      const firstAnswer = deliver(first);
      await waitingOnGate();
      const giveUp = new AbortController();
      const answers = ids.map((id, i) => deliver(id, i % 2 === 0 ? giveUp.signal : undefined));
      await sleep(200);
      giveUp.abort();
      await sleep(100);
      await holder.query("select pg_advisory_unlock($1)", [GATE]);
      const statuses = await Promise.all([firstAnswer, ...answers]);
      expect(statuses).toEqual([202, ...ids.map((_, i) => (i % 2 === 0 ? 0 : 202))]);
      expect((await keptIds()).filter((id) => [first, ...ids].includes(id)).sort()).toEqual([first, ...ids].sort());
      expect(await Promise.all(ids.map((id) => deliver(id)))).toEqual(ids.map(() => 204));
    } finally {
      await holder.query("select pg_advisory_unlock_all()").catch(() => {});
      holder.release();
    }
  }, 60_000);

  it("Postgres SIGKILLed while a batch's COMMIT waits: no 2xx for a row that is gone, each kept once by the retries", async () => {
    let answered2xx = 0;
    let lost = 0;
    for (let round = 0; round < 3; round++) {
      const holder = await admin.connect();
      await holder.query("select pg_advisory_lock($1)", [GATE]);
      const first = `evt_gate_${randomUUID()}`;
      const ids = [first, ...Array.from({ length: 24 }, () => `evt_batch_${randomUUID()}`)];
      const firstAnswer = deliver(first);
      await waitingOnGate();
      const rest = ids.slice(1).map((id) => deliver(id));
      await sleep(200);
      holder.release();
      await server?.stop(true);
      const statuses = await Promise.all([firstAnswer, ...rest]);
      await server?.restart();
      const kept = new Set(await keptIds());
      ids.forEach((id, i) => {
        if ((statuses[i] ?? 0) < 200 || (statuses[i] ?? 0) > 299) return;
        answered2xx++;
        if (!kept.has(id)) lost++;
      });
      // The sender's retries, until each is answered 2xx: each id kept once.
      for (const id of ids) {
        for (let tries = 0; tries < 40 && ![202, 204].includes(await deliver(id)); tries++) await sleep(100);
      }
      const after = await keptIds();
      for (const id of ids) expect(after.filter((one) => one === id)).toEqual([id]);
    }
    expect({ answered2xx, lost }).toEqual({ answered2xx, lost: 0 });
  }, 120_000);
});
