import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { signatureOf } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import {
  databaseFile,
  eventBody,
  type ReceiverProcess,
  SQLITE_SECRET,
  startReceiver,
  stopReceiver,
} from "../../support/sqlite.js";

// Exactly once through crashes, on one SQLite file in WAL mode: two receiver processes
// (test/fixtures/sqlite-receiver.ts on Node 20) share it, every event is delivered to both at
// once, the handler writes an effect row through tx and sleeps, and a receiver is SIGKILLed
// inside a handler again and again, then restarted on its port. The sender retries every non-2xx
// and broken connection; at the end each event has exactly one effect row. The effects table has
// no unique key: only the inbox keeps a second row out. On better-sqlite3, and on libSQL.

interface Tally {
  statuses: Map<number, number>;
  broken: number;
}

/** Delivers one copy until it gets a 2xx, retrying every other answer and every broken connection. */
async function deliverUntilOk(port: () => number, text: string, tally: Tally): Promise<void> {
  for (let attempt = 0; attempt < 2000; attempt++) {
    try {
      const answer = await fetch(`http://127.0.0.1:${port()}/webhooks`, {
        method: "POST",
        headers: { "content-type": "application/json", "service-signature": await signatureOf(SQLITE_SECRET, text) },
        body: text,
        signal: AbortSignal.timeout(10_000),
      });
      await answer.arrayBuffer();
      tally.statuses.set(answer.status, (tally.statuses.get(answer.status) ?? 0) + 1);
      if (answer.status >= 200 && answer.status < 300) return;
    } catch {
      tally.broken++;
    }
    await sleep(20);
  }
  throw new Error("a delivery never got a 2xx");
}

/** Runs `work` over `items`, `concurrency` at a time. */
async function pool<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

const starts = (receiver: ReceiverProcess) => (receiver.output.match(/^start /gm) ?? []).length;

describe.each([
  ["better-sqlite3", "better-sqlite3"],
  ["libSQL (@libsql/client, a local file)", "libsql"],
])("SqliteInbox through crashes on %s: two processes on one WAL file", (_name, driver) => {
  // Answering first, each event goes to one receiver only: a second copy at the other would run
  // it anyway, and hide an event lost by a 2xx that left before its COMMIT.
  it.each([
    ["each event sent to both at once; the handler returns", "0"],
    ["each event sent once; the handler answers 200 through res before it sleeps", "1"],
  ])(
    "receivers SIGKILLed mid-handler (%s): one effect per event",
    async (mode, answerFirst) => {
      const file = databaseFile();
      const setup = new Database(file);
      setup.pragma("journal_mode = wal");
      setup.exec("create table effects (event_id text not null, receiver text not null)");
      setup.close();
      const env = (name: string) => ({
        DRIVER: driver,
        FILE: file,
        NAME: name,
        HANDLER_MS: "40",
        ANSWER_FIRST: answerFirst,
        TIMEOUT_MS: "3000",
      });
      const ports = [await freePort(), await freePort()] as const;
      const receivers = [
        await startReceiver("node20", env("a"), ports[0]),
        await startReceiver("node20", env("b"), ports[1]),
      ];
      const everyOutput: string[] = [];
      try {
        const ids: string[] = [];
        const tally: Tally = { statuses: new Map(), broken: 0 };
        let sending = true;
        let kills = 0;
        let midHandler = 0;
        // The killer: waits until the target is inside a handler (its effect row written, not
        // committed), SIGKILLs it there, and starts it again on the same port.
        const killer = (async () => {
          for (let round = 0; sending && round < 4; round++) {
            const target = receivers[round % 2] as ReceiverProcess;
            const seen = starts(target);
            for (let waited = 0; sending && starts(target) === seen && waited < 5000; waited += 2) await sleep(2);
            if (!sending) break;
            if (starts(target) > seen) midHandler++;
            await stopReceiver(target);
            kills++;
            everyOutput.push(target.output);
            receivers[round % 2] = await startReceiver("node20", env(target.name), target.port);
            await sleep(100);
          }
        })();
        let killed = false;
        void killer.finally(() => {
          killed = true;
        });
        const deadline = Date.now() + 40_000;
        while ((ids.length < 40 || !killed) && Date.now() < deadline) {
          const batch = Array.from({ length: 6 }, () => `evt_${randomUUID()}`);
          ids.push(...batch);
          await pool(batch, 6, async (id) => {
            const text = eventBody(id);
            const targets = answerFirst === "1" ? [ids.indexOf(id) % 2] : [0, 1];
            await Promise.all(
              targets.map((index) => deliverUntilOk(() => (receivers[index] as ReceiverProcess).port, text, tally)),
            );
          });
        }
        sending = false;
        await killer;

        const reader = new Database(file, { readonly: true });
        const rows = reader.prepare("select event_id, count(*) as n from effects group by event_id").all() as {
          event_id: string;
          n: number;
        }[];
        reader.close();
        const effects = new Map(rows.map((row) => [row.event_id, row.n]));
        const lost = ids.filter((id) => !effects.has(id));
        const doubled = ids.filter((id) => (effects.get(id) ?? 0) > 1);
        console.log(
          `SQLite crash test (${driver}, ${mode}): ${ids.length} events × ${answerFirst === "1" ? 1 : 2} copies, ` +
            `${kills} receivers SIGKILLed (${midHandler} mid-handler), answers ${JSON.stringify(Object.fromEntries(tally.statuses))}, ` +
            `${tally.broken} broken connections; ${lost.length} lost, ${doubled.length} doubled`,
        );
        expect(kills).toBeGreaterThanOrEqual(4);
        expect(midHandler).toBeGreaterThanOrEqual(2);
        expect(tally.broken).toBeGreaterThan(0);
        expect(lost).toEqual([]);
        expect(doubled).toEqual([]);
        for (const output of [...everyOutput, ...receivers.map((r) => r.output)]) {
          expect(output).not.toContain("unhandled rejection");
        }
      } finally {
        await Promise.all(receivers.map(stopReceiver));
      }
    },
    60_000,
  );
});
