import { resolve } from "node:path";
import { FlagMirror, flagHistory, inOrder, shuffledCopy } from "flag-webhooks/testing";
import { deliverUntilOk, newTally, pool, startReceiverProcess, type Tally } from "./crash.js";
import { freePort } from "./free-port.js";
import { nodeFixture } from "./node-bundle.js";
import { snapshotOf, wrongFields } from "./order-mirror.js";
import type { Started } from "./processes.js";

// Two receiver processes on one database (test/fixtures/order-receiver.ts, an inbox with `order`
// whose handler writes a mirror of flag state through tx), the same shuffled stream with copies
// sent to both at once, each delivery retried until a 2xx as the service retries: the mirror must
// end as the history applied in order. Shared by the Postgres and SQLite tests.

const root = resolve(import.meta.dirname, "../..");
export const ORDER_SECRET = "whsec-order-processes-test";
const FLAGS = ["alpha", "beta", "gamma", "delta"];

/** What the race ended with: the mirror against the in-order state, and what the sender saw. */
export interface RaceResult {
  /** Fields of the mirror that differ from the in-order state (missing, extra, or another value). */
  wrong: number;
  /** How many fields the in-order state has. */
  fields: number;
  mirror: Record<string, unknown>;
  expected: Record<string, unknown>;
  tally: Tally;
  /** How many deliveries were sent to each process. */
  sent: number;
}

/**
 * Races two receiver processes started with `env` (DATABASE_URL or FILE) on `scope`: a history of
 * `length` events for each of four flags (two environments, three paths), shuffled with copies (the test kit's flagHistory and
 * shuffledCopy), sent whole to both at once, `concurrency` in flight per process; then `mirror`
 * reads the scope's mirror rows.
 */
export async function raceTwoReceivers(
  env: Record<string, string>,
  scope: string,
  mirror: () => Promise<readonly Record<string, unknown>[]>,
  { length = 30, seed = 7, concurrency = 6 } = {},
): Promise<RaceResult> {
  const bundle = await nodeFixture("order-receiver", ["pg", "better-sqlite3", "express"]);
  const paths = ["on", "rollout.percent", "rules"];
  const history = FLAGS.flatMap((flag, i) =>
    flagHistory({ flag, length, paths, seed: seed + i, start: "2026-11-21T09:00:00Z" }),
  );
  const stream = shuffledCopy(history, { seed, duplicates: 0.3 }).map((event) => JSON.stringify(event));
  const started: Started[] = [];
  const tally = newTally();
  try {
    const ports: number[] = [];
    for (const name of ["a", "b"]) {
      const port = await freePort();
      started.push(
        await startReceiverProcess(`the order receiver ${name}`, process.execPath, [bundle], {
          cwd: root,
          env: { ...process.env, ...env, SCOPE: scope, WEBHOOK_SECRET: ORDER_SECRET, PORT: String(port) },
        }),
      );
      ports.push(port);
    }
    await Promise.all(
      ports.map((port) =>
        pool(stream, concurrency, (text) => deliverUntilOk(() => port, text, ORDER_SECRET, tally, { pause: 5 })),
      ),
    );
  } finally {
    await Promise.all(started.map((process) => process.stop()));
  }
  const expected = new FlagMirror();
  for (const event of inOrder(history)) expected.apply(event);
  const want = expected.snapshot();
  const got = snapshotOf(await mirror());
  return {
    wrong: wrongFields(got, want),
    fields: Object.keys(want).length,
    mirror: got,
    expected: want,
    tally,
    sent: stream.length,
  };
}
