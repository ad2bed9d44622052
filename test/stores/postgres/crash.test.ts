import { randomUUID } from "node:crypto";
import { createServer as createHttpServer, type Server } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { build } from "esbuild";
import express from "express";
import { webhookMiddleware } from "flag-webhooks/express";
import { PostgresInbox } from "flag-webhooks/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  deliverUntilOk,
  killInsideHandlers,
  lostAndDoubled,
  newTally,
  pool,
  sendInBatches,
  startReceiverProcess,
} from "../../support/crash.js";
import { eventJson } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { close, listen } from "../../support/http.js";
import {
  type PostgresServer,
  postgresAvailability,
  startPostgres,
  stopPostgres,
} from "../../support/postgres-server.js";
import type { Started } from "../../support/processes.js";

// Exactly once through crashes, on a real PostgreSQL: receivers SIGKILLed mid-handler and
// restarted while every event is delivered twice at once to two receivers; then Postgres itself
// SIGKILLed and restarted mid-traffic. The sender retries every non-2xx and broken connection;
// at the end each event has exactly one effect row. The effects table has no unique key: only
// the inbox keeps a second row out.

const availability = postgresAvailability();
const SECRET = "whsec-postgres-crash-test";
const root = join(import.meta.dirname, "../../..");

const body = (id: string) => eventJson(id);

describe.skipIf(!availability.available)("PostgresInbox through crashes (real PostgreSQL)", () => {
  let server: PostgresServer;
  let admin: pg.Pool;
  // The receiver process, bundled once: it starts in a tenth of the time tsx takes, so the
  // receivers killed here are back within the sender's retries.
  const receiverBundle = join(root, ".test-results/postgres-receiver.cjs");
  beforeAll(async () => {
    await build({
      entryPoints: [join(root, "test/fixtures/postgres-receiver.ts")],
      bundle: true,
      platform: "node",
      format: "cjs",
      outfile: receiverBundle,
      external: ["pg-native"],
      logLevel: "warning",
    });
    server = await startPostgres();
    admin = new pg.Pool({ connectionString: server.url, max: 2 });
    admin.on("error", () => {});
    await new PostgresInbox(admin, { scope: "crash" }).migrate();
    await admin.query("create table crash_effects (event_id text not null, receiver text not null)");
  });
  afterAll(async () => {
    await admin?.end();
    await stopPostgres(server);
  });

  async function effectsPerEvent(ids: string[]): Promise<Map<string, number>> {
    const rows = await admin.query(
      "select event_id, count(*)::int as n from crash_effects where event_id = any($1) group by event_id",
      [ids],
    );
    return new Map(rows.rows.map((row) => [row.event_id as string, row.n as number]));
  }

  // Answering first, each event goes to one receiver only: a second copy at the other would run
  // it anyway, and hide an event lost by a 2xx that left before its COMMIT.
  it.each([
    ["each event sent to both at once; the handler returns", "0"],
    ["each event sent once; the handler answers 200 through res before it sleeps", "1"],
  ])(
    "two receiver processes, receivers SIGKILLed mid-handler (%s): one effect per event",
    async (_mode, answerFirst) => {
      type Receiver = Started & { name: string; port: number };
      const start = (name: string, port: number): Promise<Receiver> =>
        startReceiverProcess(name, process.execPath, [receiverBundle], {
          cwd: root,
          env: {
            ...process.env,
            DATABASE_URL: server.url,
            WEBHOOK_SECRET: SECRET,
            PORT: String(port),
            NAME: name,
            ANSWER_FIRST: answerFirst,
          },
        }).then((watched) => Object.assign(watched, { name, port }));
      const ports = [await freePort(), await freePort()] as const;
      const receivers = [await start("a", ports[0]), await start("b", ports[1])];

      try {
        const tally = newTally();
        const killer = killInsideHandlers(receivers, {
          rounds: 4,
          started: /^start /gm,
          restart: (killed) => start(killed.name, killed.port),
        });
        const ids = await sendInBatches({ atLeast: 40, enough: () => killer.done }, async (id, index) => {
          const text = body(id);
          // Two copies at the same moment, one to each receiver; or, answering first, one copy.
          const targets = answerFirst === "1" ? [index % 2] : [0, 1];
          await Promise.all(
            targets.map((at) => deliverUntilOk(() => (receivers[at] as Receiver).port, text, SECRET, tally)),
          );
        });
        await killer.stop();
        const { kills, midHandler } = killer;

        const effects = await effectsPerEvent(ids);
        const { lost, doubled } = lostAndDoubled(ids, effects);
        console.log(
          `crash test (answer first: ${answerFirst}): ${ids.length} events × ${answerFirst === "1" ? 1 : 2} copies, ${kills} receivers SIGKILLed (${midHandler} mid-handler), ` +
            `answers ${JSON.stringify(Object.fromEntries(tally.statuses))}, ${tally.broken} broken connections; ` +
            `${lost.length} lost, ${doubled.length} doubled`,
        );
        expect(kills).toBeGreaterThanOrEqual(4);
        expect(midHandler).toBeGreaterThanOrEqual(2);
        expect(tally.broken).toBeGreaterThan(0); // the kills did cut deliveries off
        expect(lost).toEqual([]);
        expect(doubled).toEqual([]);
        expect([...effects.values()].every((n) => n === 1)).toBe(true);
        for (const output of [...killer.outputs, ...receivers.map((r) => r.output)]) {
          expect(output).not.toContain("unhandled rejection");
        }
        // The rows of the killed handlers were rolled back by Postgres: no transaction left open.
        const open = await admin.query(
          "select count(*)::int as n from pg_stat_activity where state like 'idle in transaction%'",
        );
        expect(open.rows[0].n).toBe(0);
      } finally {
        await Promise.all(receivers.map((receiver) => receiver.kill()));
      }
    },
    60_000,
  );

  it("Postgres SIGKILLed and restarted mid-traffic: only 503s meanwhile, no crash, then every event handled once", async () => {
    const servers: Server[] = [];
    const pools: pg.Pool[] = [];
    const errors: unknown[] = [];
    for (const name of ["a", "b"]) {
      const db = new pg.Pool({ connectionString: server.url, max: 10, connectionTimeoutMillis: 1000 });
      db.on("error", () => {}); // idle clients lose their server when it is killed
      pools.push(db);
      const inbox = new PostgresInbox(db, { scope: "restart", lockTimeout: 1000, timeout: 1500 });
      const app = express();
      app.post(
        "/webhooks",
        webhookMiddleware({
          secret: SECRET,
          onError: (error) => void errors.push(error),
          onEvent: inbox.handle(async (event, tx) => {
            await tx.query("insert into crash_effects (event_id, receiver) values ($1, $2)", [event.id, name]);
            await sleep(20);
          }),
        }),
      );
      servers.push(await listen(createHttpServer(app)));
    }
    const portOf = (i: number) => () => ((servers[i] as Server).address() as { port: number }).port;
    try {
      const ids = Array.from({ length: 120 }, () => `evt_${randomUUID()}`);
      const tally = newTally();
      let downAt = 0;
      let upAt = 0;
      const chaos = (async () => {
        await sleep(400);
        downAt = performance.now();
        await server.stop(true);
        await sleep(700);
        await server.restart();
        upAt = performance.now();
      })();
      await pool(ids, 6, async (id) => {
        const text = body(id);
        await Promise.all([
          deliverUntilOk(portOf(0), text, SECRET, tally),
          deliverUntilOk(portOf(1), text, SECRET, tally),
        ]);
        await sleep(10);
      });
      await chaos;

      const effects = await effectsPerEvent(ids);
      const statuses = Object.fromEntries(tally.statuses);
      console.log(
        `Postgres restart: ${ids.length} events × 2 copies, down ${Math.round(upAt - downAt)} ms; answers ${JSON.stringify(statuses)}; ` +
          `${ids.filter((id) => effects.get(id) !== 1).length} events not handled exactly once`,
      );
      expect(downAt).toBeGreaterThan(0);
      expect(tally.statuses.get(503) ?? 0).toBeGreaterThan(0); // the outage was seen
      // Every answer that was not a 2xx was 503 store_unavailable: no 500, no crash.
      expect([...tally.statuses.keys()].filter((status) => status < 200 || status > 299)).toEqual([503]);
      expect(tally.broken).toBe(0);
      expect(ids.filter((id) => effects.get(id) !== 1)).toEqual([]);
    } finally {
      await Promise.all(servers.map((s) => close(s)));
      await Promise.all(pools.map((p) => p.end()));
    }
  }, 60_000);
});
