import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { deliverUntilOk, killInsideHandlers, lostAndDoubled, newTally, sendInBatches } from "../../support/crash.js";
import { eventJson } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import {
  databaseFile,
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

// Concurrent: each run has its own file, ports and processes, and is mostly waiting on handlers
// sleeping and killed receivers coming back, so the four overlap.
describe.concurrent.each([
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
      try {
        const tally = newTally();
        const killer = killInsideHandlers(receivers, {
          rounds: 4,
          started: /^start /gm,
          restart: (killed) => startReceiver("node20", env(killed.name), killed.port),
        });
        const ids = await sendInBatches({ atLeast: 40, enough: () => killer.done }, async (id, index) => {
          const text = eventJson(id);
          const targets = answerFirst === "1" ? [index % 2] : [0, 1];
          await Promise.all(
            targets.map((at) =>
              deliverUntilOk(() => (receivers[at] as ReceiverProcess).port, text, SQLITE_SECRET, tally),
            ),
          );
        });
        await killer.stop();
        const { kills, midHandler } = killer;

        const reader = new Database(file, { readonly: true });
        const rows = reader.prepare("select event_id, count(*) as n from effects group by event_id").all() as {
          event_id: string;
          n: number;
        }[];
        reader.close();
        const { lost, doubled } = lostAndDoubled(ids, new Map(rows.map((row) => [row.event_id, row.n])));
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
        for (const output of [...killer.outputs, ...receivers.map((r) => r.output)]) {
          expect(output).not.toContain("unhandled rejection");
        }
      } finally {
        await Promise.all(receivers.map(stopReceiver));
      }
    },
    60_000,
  );
});
