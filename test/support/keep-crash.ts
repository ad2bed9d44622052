import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import pg from "pg";
import {
  deliverUntilOk,
  killInsideHandlers,
  lostAndDoubled,
  newTally,
  sendInBatches,
  startReceiverProcess,
} from "./crash.js";
import { eventJson } from "./deliveries.js";
import { freePort } from "./free-port.js";
import { nodeFixture } from "./node-bundle.js";
import { type PostgresServer, startPostgres, stopPostgres } from "./postgres-server.js";
import type { Started } from "./processes.js";
import { databaseFile } from "./sqlite.js";

// The crash proof of keep then work, shared by its test (test/stores/work/keep-crash.test.ts, a
// small count) and its soak (scripts/soak-keep.mjs, 1,000 events and more): two receiver and two
// worker processes (test/fixtures/keep-crash.ts) on one Postgres or one SQLite file, every event
// sent to both receivers at once, handlers that fail at random and sleep, receivers and workers
// SIGKILLed inside what they do and started again, Postgres SIGKILLed and restarted once. At the
// end every event must be done, its effect row there exactly once (the effects table has no
// unique key: only the inbox keeps a second row out), and none parked.

const root = resolve(import.meta.dirname, "../..");
const SECRET = "whsec-keep-crash";
const SCOPE = "keep-crash";

/** Where the processes keep events. */
export type KeepCrashBackend = "postgres" | "better-sqlite3" | "better-sqlite3-keep-on" | "libsql";

export interface KeepCrashOptions {
  backend: KeepCrashBackend;
  /** How many events to send, at least (each twice at once). */
  events: number;
  /** How many processes to SIGKILL, in turn: receiver a, worker a, receiver b, worker b… */
  kills: number;
  /** Postgres: SIGKILL the server and restart it once, when half the events are out. */
  restartDatabase?: boolean;
  /** How long the sending may take before it stops short of `events`, in ms. */
  within?: number;
}

/** What a run did and found. */
export interface KeepCrashResult {
  events: number;
  kills: number;
  /** Kills that landed while the victim was inside an event (a handler, or keeping one). */
  midWork: number;
  databaseRestarts: number;
  statuses: Record<string, number>;
  broken: number;
  lost: string[];
  doubled: string[];
  parked: number;
  notDone: number;
  /** Attempts the workers made in all, and the events that needed more than one. */
  attempts: number;
  retried: number;
  /** What the processes printed that they must not: an unhandled rejection. */
  unhandled: string[];
  seconds: number;
}

/** What a process of the fixture does. */
export type Role = "receiver" | "worker";
type Member = Started & { name: string; role: Role; port: number };

let bundled: Promise<string> | undefined;
/** The fixture bundled once (flag-webhooks/* from src/, the drivers external), so that a killed process is back at once. */
function bundle(): Promise<string> {
  bundled ??= nodeFixture("keep-crash", ["better-sqlite3", "@libsql/client", "pg", "pg-native"]);
  return bundled;
}

/** The secret the fixture's receivers verify with. */
export const KEEP_CRASH_SECRET = SECRET;

/**
 * A process of the fixture (a receiver on `port`, or a worker) on the database `env` names
 * (DATABASE_URL, or FILE and DRIVER), its events in the scope "keep-crash"; resolves once it listens.
 */
export async function startKeepProcess(role: Role, port: number, env: Record<string, string>): Promise<Started> {
  const script = await bundle();
  return startReceiverProcess(`keep-crash ${role}`, process.execPath, [script], {
    cwd: root,
    env: { ...process.env, ...env, ROLE: role, PORT: String(port), WEBHOOK_SECRET: SECRET },
    within: 20_000,
  });
}

/** The database of a run, as the test process reads it. */
interface Ground {
  env: Record<string, string>;
  inbox: PostgresInbox | SqliteInbox;
  effects(): Promise<Map<string, number>>;
  states(): Promise<{ states: Map<string, number>; attempts: number; retried: number }>;
  server?: PostgresServer;
  close(): Promise<void>;
}

async function groundOf(backend: KeepCrashBackend): Promise<Ground> {
  if (backend === "postgres") {
    const server = await startPostgres();
    const admin = new pg.Pool({ connectionString: server.url, max: 2 });
    admin.on("error", () => {});
    const inbox = new PostgresInbox(admin, { scope: SCOPE });
    await inbox.migrate();
    await admin.query("create table keep_effects (event_id text not null)");
    const rows = async (sql: string) => (await admin.query(sql)).rows as Record<string, unknown>[];
    return {
      env: { DATABASE_URL: server.url },
      inbox,
      server,
      effects: async () =>
        new Map(
          (await rows("select event_id, count(*)::int as n from keep_effects group by event_id")).map((row) => [
            String(row.event_id),
            Number(row.n),
          ]),
        ),
      states: async () => tally(await rows(`select state, attempts from flag_webhooks_inbox where scope = '${SCOPE}'`)),
      async close() {
        await admin.end();
        await stopPostgres(server);
      },
    };
  }
  const file = databaseFile("keep-crash.db");
  const db = new Database(file);
  db.pragma("journal_mode = wal");
  db.pragma("busy_timeout = 5000");
  const inbox = new SqliteInbox(db, { scope: SCOPE });
  await inbox.migrate();
  db.exec("create table keep_effects (event_id text not null)");
  const rows = (sql: string) => db.prepare(sql).all() as Record<string, unknown>[];
  return {
    env: { FILE: file, DRIVER: backend },
    inbox,
    effects: async () =>
      new Map(
        rows("select event_id, count(*) as n from keep_effects group by event_id").map((row) => [
          String(row.event_id),
          Number(row.n),
        ]),
      ),
    states: async () => tally(rows(`select state, attempts from flag_webhooks_inbox where scope = '${SCOPE}'`)),
    close: async () => void db.close(),
  };
}

function tally(rows: Record<string, unknown>[]) {
  const states = new Map<string, number>();
  let attempts = 0;
  let retried = 0;
  for (const row of rows) {
    states.set(String(row.state), (states.get(String(row.state)) ?? 0) + 1);
    attempts += Number(row.attempts);
    if (Number(row.attempts) > 1) retried++;
  }
  return { states, attempts, retried };
}

/** Runs the crash proof once and says what it found; the caller asserts. */
export async function keepCrash(options: KeepCrashOptions): Promise<KeepCrashResult> {
  // Sending stops as soon as the kills are done; `within` only bounds a machine so loaded that
  // they cannot be (a fresh clone's CI under a load of 12 needed more than 40 s for six).
  const { backend, events, kills, restartDatabase = false, within = 90_000 } = options;
  const began = Date.now();
  const ground = await groundOf(backend);
  const start = async (name: string, role: Role, port: number): Promise<Member> =>
    Object.assign(await startKeepProcess(role, port, ground.env), { name, role, port });
  const members: Member[] = [];
  const outputs: string[] = [];
  try {
    const [portA, portB] = [await freePort(), await freePort()];
    // In the killer's turn: receiver a, worker a, receiver b, worker b.
    members.push(
      await start("a", "receiver", portA),
      await start("a", "worker", 0),
      await start("b", "receiver", portB),
      await start("b", "worker", 0),
    );
    const receiverPort = (name: string) => () =>
      (members.find((member) => member.role === "receiver" && member.name === name) as Member).port;
    const sendTally = newTally();
    const killer = killInsideHandlers(members, {
      rounds: kills,
      started: /^start /gm,
      restart: (killed) => start(killed.name, killed.role, killed.port),
      wait: 3000,
      pause: 150,
    });
    let databaseRestarts = 0;
    let restarting: Promise<void> | undefined;
    const ids = await sendInBatches(
      { atLeast: events, enough: () => killer.done, batch: 10, within },
      async (id, index) => {
        if (restartDatabase && ground.server && index === Math.floor(events / 2) && !restarting) {
          const server = ground.server;
          restarting = (async () => {
            await server.stop(true);
            await sleep(300);
            await server.restart();
            databaseRestarts++;
          })();
        }
        const text = eventJson(id);
        await Promise.all(["a", "b"].map((name) => deliverUntilOk(receiverPort(name), text, SECRET, sendTally)));
      },
    );
    await killer.stop();
    await restarting;
    outputs.push(...killer.outputs);
    // The workers go on until nothing is pending or running (an event a killed worker held waits for its lease).
    const deadline = Date.now() + 60_000;
    for (;;) {
      const counts = await ground.inbox.counts().catch(() => undefined);
      if (counts && counts.pending === 0 && counts.running === 0) break;
      if (Date.now() > deadline) break;
      await sleep(100);
    }
    await Promise.all(members.map((member) => member.stop()));
    outputs.push(...members.map((member) => member.output));
    const effects = await ground.effects();
    const { lost, doubled } = lostAndDoubled(ids, effects);
    const { states, attempts, retried } = await ground.states();
    return {
      events: ids.length,
      kills: killer.kills,
      midWork: killer.midHandler,
      databaseRestarts,
      statuses: Object.fromEntries([...sendTally.statuses].sort(([a], [b]) => a - b)),
      broken: sendTally.broken,
      lost,
      doubled,
      parked: states.get("parked") ?? 0,
      notDone: ids.length - (states.get("done") ?? 0),
      attempts,
      retried,
      unhandled: outputs.flatMap((output) => output.match(/^unhandled rejection .*$/gm) ?? []),
      seconds: Math.round((Date.now() - began) / 100) / 10,
    };
  } finally {
    await Promise.all(members.map((member) => member.stop()));
    await ground.close();
  }
}

/** One line of a run's figures, for the test's log and the soak's report. */
export function keepCrashLine(backend: KeepCrashBackend, result: KeepCrashResult): string {
  return (
    `keep then work through crashes on ${backend}: ${result.events} events × 2 copies at once, ` +
    `${result.kills} processes SIGKILLed (${result.midWork} inside an event), ${result.databaseRestarts} database restarts; ` +
    `answers ${JSON.stringify(result.statuses)}, ${result.broken} broken connections; ${result.attempts} attempts ` +
    `(${result.retried} events retried); ${result.lost.length} lost, ${result.doubled.length} doubled, ` +
    `${result.parked} parked, ${result.notDone} not done; ${result.seconds} s`
  );
}
