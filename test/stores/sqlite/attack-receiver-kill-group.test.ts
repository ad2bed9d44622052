import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { describe, expect, it } from "vitest";
import { deliverUntilOk, newTally } from "../../support/crash.js";
import { eventJson } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { KEEP_CRASH_SECRET, startKeepProcess } from "../../support/keep-crash.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on a SQLite receiver process (the keep-crash fixture) SIGKILLed while 32 deliveries at
// once are being kept by group commit: the kill lands once 1 to 8 of them were answered, so
// inside a group's COMMIT or between two. What must hold: every delivery answered
// 2xx is in the file when it is opened again, and the sender's retries keep each event once.
// Held: better-sqlite3 54 of 256 answered 2xx before the kills (202 connections cut), libSQL 36
// (220 cut), 0 answered and missing, each of the 256 kept once after the retries. (The Postgres
// one: test/stores/work/group-commit.test.ts.)

const ROUNDS = 8;
const AT_ONCE = 32;

for (const driver of ["better-sqlite3", "libsql"] as const) {
  describe(`${driver}: a receiver SIGKILLed while a group is kept`, () => {
    it(`${ROUNDS} rounds of ${AT_ONCE} deliveries at once: no delivery answered 2xx is missing from the file; the retries keep each once`, async () => {
      const file = databaseFile("receiver-kill.db");
      const db = new Database(file);
      try {
        db.pragma("journal_mode = wal");
        await new SqliteInbox(db, { scope: "keep-crash" }).migrate();
        const env = { FILE: file, DRIVER: driver };
        const port = await freePort();
        let answered2xx = 0;
        let lost = 0;
        let broken = 0;
        const all: string[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          const receiver = await startKeepProcess("receiver", port, env);
          const ids = Array.from({ length: AT_ONCE }, () => `evt_${randomUUID()}`);
          all.push(...ids);
          const tally = newTally();
          let okSoFar = 0;
          const answers = ids.map((id) =>
            deliverUntilOk(() => port, eventJson(id), KEEP_CRASH_SECRET, tally, { attempts: 1 }).then(
              () => {
                okSoFar++;
                return true;
              },
              () => false,
            ),
          );
          // Killed once the round's first answers left (however slow the machine), while the rest
          // are being kept: after 1 to 8 answers, as the rounds go.
          for (let waited = 0; okSoFar < 1 + round && waited < 10_000; waited += 1) await sleep(1);
          await receiver.kill();
          const ok = await Promise.all(answers);
          broken += tally.broken;
          ids.forEach((id, i) => {
            if (!ok[i]) return;
            answered2xx++;
            const row = db.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as {
              n: number;
            };
            if (row.n !== 1) lost++;
          });
        }
        const receiver = await startKeepProcess("receiver", port, env);
        try {
          await Promise.all(all.map((id) => deliverUntilOk(() => port, eventJson(id), KEEP_CRASH_SECRET, newTally())));
        } finally {
          await receiver.stop();
        }
        const counts = new Map<string, number>();
        for (const row of db.prepare("select id from flag_webhooks_inbox").all() as { id: string }[]) {
          counts.set(row.id, (counts.get(row.id) ?? 0) + 1);
        }
        console.log(
          `${driver}: ${ROUNDS} × ${AT_ONCE} deliveries, a SIGKILL in each round: ${answered2xx} answered 2xx, ${broken} connections broken, ${lost} answered and missing`,
        );
        expect(answered2xx).toBeGreaterThanOrEqual(ROUNDS);
        expect({ lost, missingAfterRetries: all.filter((id) => counts.get(id) !== 1).length }).toEqual({
          lost: 0,
          missingAfterRetries: 0,
        });
      } finally {
        db.close();
      }
    }, 120_000);
  });
}
