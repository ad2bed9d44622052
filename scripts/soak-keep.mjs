#!/usr/bin/env node
// `npm run soak:keep`: keep then work through crashes, at size. For each database (Postgres,
// SQLite on better-sqlite3, SQLite on libSQL; or those named as arguments) the crash proof of
// test/support/keep-crash.ts: two receivers and two workers as processes on one database, 1,000
// events (SOAK_EVENTS) each sent to both receivers at once, handlers failing one attempt in five
// (at most three times) and sleeping 5-20 ms, SOAK_KILLS (20) receivers and workers SIGKILLed in
// turn inside what they do, and Postgres SIGKILLed and restarted once. Prints each run's figures;
// exits 1 unless every event is done with its effect exactly once, none lost, doubled or parked.
// Run with tsx (the npm script does), which loads the TypeScript harness.
import { keepCrash, keepCrashLine } from "../test/support/keep-crash.ts";

const EVENTS = Number(process.env.SOAK_EVENTS ?? 1000);
const KILLS = Number(process.env.SOAK_KILLS ?? 20);
const chosen = process.argv.slice(2);
const backends = chosen.length ? chosen : ["postgres", "better-sqlite3", "libsql"];

let failed = false;
for (const backend of backends) {
  const result = await keepCrash({
    backend,
    events: EVENTS,
    kills: KILLS,
    restartDatabase: backend === "postgres",
    within: 30 * 60_000,
  });
  console.log(keepCrashLine(backend, result));
  const wrong =
    result.lost.length + result.doubled.length + result.parked + result.notDone + result.unhandled.length > 0 ||
    result.events < EVENTS;
  if (wrong) {
    failed = true;
    console.log(
      `  FAILED: ${JSON.stringify({ lost: result.lost, doubled: result.doubled, unhandled: result.unhandled })}`,
    );
  }
}
process.exitCode = failed ? 1 : 0;
