import { describe, expect, it } from "vitest";
import { type KeepCrashBackend, keepCrash, keepCrashLine } from "../../support/keep-crash.js";
import { postgresAvailability } from "../../support/postgres-server.js";

// Keep then work through crashes (test/support/keep-crash.ts): two receivers and two workers as
// processes on one database, every event sent to both receivers at once, handlers failing at
// random and sleeping, receivers and workers SIGKILLed in turn inside what they do, and Postgres
// itself SIGKILLed and restarted once. Every event done, its effect exactly once, none parked.
// Sized for npm test; scripts/soak-keep.mjs runs 1,000 events and more.

const availability = postgresAvailability();

const backends: [KeepCrashBackend, boolean][] = [
  ["postgres", availability.available],
  ["better-sqlite3", true],
  // The receivers keep each delivery on a second connection of the inbox's own (keepOn).
  ["better-sqlite3-keep-on", true],
  ["libsql", true],
];

// Concurrent: each backend has its own database, ports and processes, and most of a run is spent
// waiting (handlers sleeping, killed processes coming back), so the three overlap.
describe.concurrent.each(backends)("keep then work through crashes on %s", (backend, available) => {
  it.runIf(available)(
    "2 receivers and 2 workers SIGKILLed in turn: every event done, its effect once, 0 lost, 0 doubled, 0 parked",
    async () => {
      const result = await keepCrash({ backend, events: 60, kills: 6, restartDatabase: backend === "postgres" });
      console.log(keepCrashLine(backend, result));
      expect(result.kills).toBe(6);
      expect(result.midWork).toBeGreaterThanOrEqual(3);
      if (backend === "postgres") expect(result.databaseRestarts).toBe(1);
      // The handlers' random failures happened, and were retried.
      expect(result.retried).toBeGreaterThan(0);
      expect(result.events).toBeGreaterThanOrEqual(60);
      expect({
        lost: result.lost,
        doubled: result.doubled,
        parked: result.parked,
        notDone: result.notDone,
        unhandled: result.unhandled,
      }).toEqual({ lost: [], doubled: [], parked: 0, notDone: 0, unhandled: [] });
    },
    180_000,
  );
});
