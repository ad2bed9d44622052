import fc from "fast-check";
import type { KnownWebhookEvent, OrderStore, WebhookEvent } from "flag-webhooks";
import { FlagMirror, inOrder, shuffledCopy, signedRequest } from "flag-webhooks/testing";
import { expect } from "vitest";
import { deliverAtOnce } from "./order-delivery.js";
import { SECRET } from "./receiver.js";

// The property every positions store must keep (docs/order.md): random histories of flag.updated,
// flag.deleted and flag.created over a few flags, environments and paths, with equal createdAts;
// delivered in a random order with random copies; the state built from what the handler saw
// equals the state built by applying the whole history in order.

const op = fc.record({
  flag: fc.constantFrom("alpha", "beta"),
  kind: fc.constantFrom("flag.updated", "flag.updated", "flag.updated", "flag.deleted", "flag.created"),
  environment: fc.constantFrom("production", "staging"),
  paths: fc.subarray(["on", "rollout.percent", "rules"], { minLength: 1 }),
  to: fc.integer({ min: 0, max: 100 }),
  // Seconds after the event before: 0 makes equal createdAts, which the ids then order.
  gap: fc.constantFrom(0, 0, 1, 30),
});

/** A random history of at most `length` events, and a seed for the order and the copies it is delivered in. */
export function histories(length: number) {
  return fc.record({
    ops: fc.array(op, { minLength: 1, maxLength: length }),
    // Ids not in the order the events happened: equal createdAts are ordered by them.
    ids: fc.uniqueArray(fc.integer({ min: 0, max: 99_999 }), { minLength: length, maxLength: length }),
    seed: fc.integer(),
  });
}

type Op = typeof op extends fc.Arbitrary<infer Value> ? Value : never;

/** One generated history. */
export type History = { ops: Op[]; ids: number[]; seed: number };

/** The events of a generated history, in the order they were made. */
export function eventsOf(history: History): KnownWebhookEvent[] {
  let at = Date.parse("2026-11-21T09:00:00Z");
  return history.ops.map((item, index) => {
    at += item.gap * 1000;
    const base = {
      id: `evt_${String(history.ids[index]).padStart(5, "0")}`,
      createdAt: new Date(at).toISOString(),
      environment: item.environment,
    };
    if (item.kind !== "flag.updated") return { ...base, type: item.kind, data: { flag: item.flag } };
    const changes = item.paths.map((path) => ({ path, from: null, to: item.to }));
    return {
      ...base,
      type: item.kind,
      data: { flag: item.flag, changes, actor: { type: "user", email: "a@example.com" } },
    };
  });
}

/**
 * Delivers a generated history through `deliver` (each copy in the shuffled order; `deliver`
 * may send them all at once) and checks that the mirror of what handlers saw equals the mirror of
 * the history applied in order. `deliver` returns what each handler saw, in the order handlers ran.
 */
export async function checkHistory(
  history: History,
  deliver: (delivered: KnownWebhookEvent[]) => Promise<WebhookEvent[]>,
): Promise<void> {
  const events = eventsOf(history);
  const expected = new FlagMirror();
  for (const event of inOrder(events)) expected.apply(event);
  const seen = await deliver(shuffledCopy(events, { seed: history.seed, duplicates: 0.4 }));
  const actual = new FlagMirror();
  for (const event of seen) actual.apply(event);
  expect(actual.snapshot()).toEqual(expected.snapshot());
}

/**
 * How many runs a property test makes: `ci` in `npm test`, or `ORDER_PROPERTY_RUNS` (the nightly
 * script, scripts/order-nightly.sh, sets it higher).
 */
export function propertyRuns(ci: number): number {
  const runs = Number(process.env.ORDER_PROPERTY_RUNS);
  return Number.isSafeInteger(runs) && runs > 0 ? runs : ci;
}

/** How many histories {@link assertHistoriesAtOnce} checks in one property run. */
export const AT_ONCE = 8;

/**
 * Checks `check` on `runs` random histories of at most `length` events ({@link propertyRuns}'s
 * count), {@link AT_ONCE} at a time, each on its own scope. On a store behind a network, a run
 * mostly waits (for requests, and for a flag another instance holds); histories checked side by
 * side fill those waits with each other's work, and add contention rather than hide any. A
 * failure ends the test at once, naming the first history of its batch that failed: shrinking a
 * batch runs it again hundreds of times, minutes on such a store.
 */
export async function assertHistoriesAtOnce(
  runs: number,
  length: number,
  check: (history: History) => Promise<void>,
): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(histories(length), { minLength: AT_ONCE, maxLength: AT_ONCE }), async (batch) => {
      const results = await Promise.allSettled(batch.map(check));
      const failed = results.findIndex((result) => result.status === "rejected");
      if (failed === -1) return;
      const { reason } = results[failed] as PromiseRejectedResult;
      throw new Error(`history ${failed} of the batch failed: ${JSON.stringify(batch[failed])}`, { cause: reason });
    }),
    { numRuns: Math.ceil(propertyRuns(runs) / AT_ONCE), endOnFailure: true },
  );
}

/**
 * Delivers `delivered` all at once through fetch receivers ordering on `stores`, one receiver per
 * store (several instances of one endpoint), copy i to receiver i modulo their number; every
 * answer must be 204. Returns what the handlers saw, in the order they finished (each after a
 * turn of the event loop, so that deliveries of one flag would overlap if nothing held it).
 */
export async function deliverThrough(stores: OrderStore[], delivered: KnownWebhookEvent[]): Promise<WebhookEvent[]> {
  const requests = await Promise.all(delivered.map((event) => signedRequest({ secret: SECRET, event })));
  const { statuses, seen } = await deliverAtOnce(stores, SECRET, requests);
  expect(statuses).toEqual(delivered.map(() => 204));
  return seen;
}
