import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { nodeScript } from "../../support/node-bundle.js";
import { type Started, startProcess, untilPrinted } from "../../support/processes.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on two worker processes on one SQLite file (better-sqlite3, WAL) whose handler, for some
// events, hangs past the attempt's deadline and ignores its signal, then writes through tx again.
// What must hold: each event's effect once, none lost or parked, the late write refused, and the
// events the hung attempt held taken by the other process once its deadline freed the lock.

const root = resolve(import.meta.dirname, "../../..");
const SCOPE = "workers-hang";
const EVENTS = 24;
const HANGING = 4;

/** The worker process: its inbox.work() prints `start|end <id> <attempt> <ms>` around each handler. */
const WORKER = `
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
const db = new Database(process.env.FILE);
db.pragma("busy_timeout = 5000");
const inbox = new SqliteInbox(db, { scope: "${SCOPE}", timeout: 3000 });
const print = (line) => process.stdout.write(line + "\\n");
inbox.work(
  async (event, tx, { attempt }) => {
    print("start " + event.id + " " + attempt + " " + Date.now());
    tx.prepare("insert into effects (event_id, pid) values (?, ?)").run(event.id, process.pid);
    if (event.id.startsWith("evt_hang") && attempt === 1) {
      await sleep(1500); // past the deadline, its signal ignored
      try {
        tx.prepare("insert into effects (event_id, pid) values (?, ?)").run(event.id, -process.pid);
        print("late write ran " + event.id);
      } catch {
        print("late write refused " + event.id);
      }
    } else await sleep(5);
    print("end " + event.id + " " + attempt + " " + Date.now());
  },
  { deadline: "300ms", lease: "2s", retries: ["10ms", "10ms", "10ms"], jitter: 0, interval: "20ms",
    onError: (error) => print("worker error " + error.message) },
);
print("listening");
`;

function workerBundle(): Promise<string> {
  return nodeScript("attack-workers-hang", WORKER, ["better-sqlite3"]);
}

describe("two worker processes on one SQLite file, a handler hanging past its deadline", () => {
  const workers: Started[] = [];
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()));
  });

  it("each effect once, none lost or parked, every late write refused; how many handlers of one event ran at once is counted", async () => {
    const file = databaseFile();
    const db = new Database(file);
    try {
      db.pragma("journal_mode = wal");
      db.pragma("busy_timeout = 5000");
      db.exec("create table effects (event_id text not null, pid integer not null)");
      const inbox = new SqliteInbox(db, { scope: SCOPE });
      await inbox.migrate();
      const ids = Array.from({ length: EVENTS }, (_, i) => `evt_${i < HANGING ? "hang" : "ok"}_${randomUUID()}`);
      for (const id of ids) await inbox.enqueue()(createEvent("flag.updated", { id }));
      const script = await workerBundle();
      for (let i = 0; i < 2; i++) {
        const worker = startProcess(process.execPath, [script], { cwd: root, env: { ...process.env, FILE: file } });
        workers.push(worker);
        await untilPrinted("a worker", worker, "listening");
      }
      for (let waited = 0; waited < 30_000; waited += 100) {
        const counts = await inbox.counts();
        if (counts.pending === 0 && counts.running === 0) break;
        await sleep(100);
      }
      // The hung handlers end 1.5 s after they began, each printing whether its late write ran:
      // waited for (a fixed wait after the last event was done was outrun once on a loaded
      // machine: 3 of 4 printed).
      const lateWrites = () =>
        workers
          .map((worker) => worker.output)
          .join("\n")
          .match(/^late write /gm)?.length ?? 0;
      for (let waited = 0; waited < 20_000 && lateWrites() < HANGING; waited += 100) await sleep(100);
      await Promise.all(workers.map((worker) => worker.stop()));
      const output = workers.map((worker) => worker.output).join("\n");
      const effects = new Map<string, number>();
      for (const row of db.prepare("select event_id from effects").all() as { event_id: string }[]) {
        effects.set(row.event_id, (effects.get(row.event_id) ?? 0) + 1);
      }
      const states = db.prepare("select state, count(*) as n from flag_webhooks_inbox group by state").all();
      // Handlers of one event running at once (from start to end), over both processes.
      const spans = new Map<string, [number, number][]>();
      const begun = new Map<string, number>();
      for (const [, what, id, attempt, at] of output.matchAll(/^(start|end) (\S+) (\d+) (\d+)$/gm)) {
        const key = `${id} ${attempt}`;
        if (what === "start") begun.set(key, Number(at));
        else spans.set(id as string, [...(spans.get(id as string) ?? []), [begun.get(key) as number, Number(at)]]);
      }
      let overlapping = 0;
      for (const list of spans.values()) {
        if (list.some(([start], i) => list.some(([s, e], j) => i !== j && s <= start && start < e))) overlapping++;
      }
      const lateRan = (output.match(/^late write ran/gm) ?? []).length;
      const lateRefused = (output.match(/^late write refused/gm) ?? []).length;
      console.log(
        `two workers, ${EVENTS} events (${HANGING} hanging): states ${JSON.stringify(states)}; late writes refused ${lateRefused}, ran ${lateRan}; events whose handlers overlapped ${overlapping}`,
      );
      expect(ids.map((id) => effects.get(id) ?? 0)).toEqual(ids.map(() => 1));
      expect(states).toEqual([{ state: "done", n: EVENTS }]);
      expect({ lateRan, lateRefused }).toEqual({ lateRan: 0, lateRefused: HANGING });
    } finally {
      db.close();
    }
  }, 90_000);
});
