import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { expect, it } from "vitest";
import { bundleWorker } from "../../support/cloudflare-bundle.js";
import {
  deliverUntilOk,
  killInsideHandlers,
  lostAndDoubled,
  newTally,
  pool,
  startReceiverProcess,
} from "../../support/crash.js";
import { eventJson } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { databaseFile } from "../../support/sqlite.js";

// Exactly once through crashes on D1, as far as miniflare allows: one Worker process (miniflare
// and its workerd, test/fixtures/cloudflare/d1-runner.mjs) whose D1 database persists in a folder,
// every event sent twice at the same moment, the handler saying "start" then waiting 40 ms before
// it returns its statement; the Worker's whole process group SIGKILLed inside a handler again and
// again, and started again on the same folder and port. The sender retries every non-2xx and
// broken connection; at the end each event has exactly one effect row. Miniflare runs one workerd
// process over a D1 folder, so two Worker processes on one database (as two receivers on one
// SQLite file are tested) cannot be run here.

const root = resolve(import.meta.dirname, "../../..");
const SECRET = "whsec-sqlite-d1-crash";

it("a Worker on D1 SIGKILLed mid-handler and restarted, every event sent twice at once: one effect per event", async () => {
  const bundle = join(dirname(databaseFile()), "worker.mjs");
  writeFileSync(bundle, await bundleWorker("test/fixtures/cloudflare/sqlite-worker.ts"));
  const persist = dirname(databaseFile());
  const port = await freePort();
  // Its own process group, so that a kill takes workerd with it.
  const start = () =>
    startReceiverProcess("the Worker", process.execPath, [join(root, "test/fixtures/cloudflare/d1-runner.mjs")], {
      cwd: root,
      env: { ...process.env, WORKER_BUNDLE: bundle, PERSIST: persist, PORT: String(port), WEBHOOK_SECRET: SECRET },
      group: true,
      within: 30_000,
      poll: 50,
    });

  const workers = [await start()];
  try {
    const tally = newTally();
    const ids = Array.from({ length: 24 }, () => `crash:${randomUUID()}`);
    const killer = killInsideHandlers(workers, {
      rounds: 3,
      started: /start crash:/g,
      restart: start,
      wait: 10_000,
      pause: 200,
    });
    const deliver = (text: string) => deliverUntilOk(() => port, text, SECRET, tally, { attempts: 1000, pause: 50 });
    await pool(ids, 4, async (id) => {
      const text = eventJson(id);
      await Promise.all([deliver(text), deliver(text)]);
    });
    await killer.stop();
    const { kills, midHandler } = killer;
    const rows = (await (await fetch(`http://127.0.0.1:${port}/effects-all`)).json()) as {
      event_id: string;
      n: number;
    }[];
    const { lost, doubled } = lostAndDoubled(ids, new Map(rows.map((row) => [row.event_id, row.n])));
    console.log(
      `D1 crash test: ${ids.length} events × 2 copies, ${kills} Worker processes SIGKILLed (${midHandler} mid-handler), ` +
        `answers ${JSON.stringify(Object.fromEntries(tally.statuses))}, ${tally.broken} broken connections; ${lost.length} lost, ${doubled.length} doubled`,
    );
    expect(kills).toBeGreaterThanOrEqual(2);
    expect(midHandler).toBeGreaterThanOrEqual(2);
    expect(tally.broken).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    expect(doubled).toEqual([]);
  } finally {
    await Promise.all(workers.map((worker) => worker.kill()));
  }
}, 120_000);
