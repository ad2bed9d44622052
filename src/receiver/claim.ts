// Dedupe by event id against a DedupeStore: claim the id before the handler runs, then mark it
// handled or release it once the receiver has decided. Every store call is bounded by
// `dedupe.timeout`; the store's failures are reported, never thrown at the handler.
import { WebhookError } from "../errors.js";
import type { ClaimResult } from "../store-contract/dedupe-store.js";
import type { DeliveryTelemetry } from "../telemetry.js";
import { isThenable } from "../util/thenable.js";
import { withTimeout } from "../util/timeout.js";
import type { DedupeSettings } from "./options.js";
import type { Reporter } from "./report.js";

/** A claimed event id, to settle once. Neither method rejects. */
export interface Claim {
  /**
   * Marks the id handled for `ttl`, retrying a failing store within `dedupe.timeout`: nothing to
   * wait for when the store marked it at once (the memory store), so the 2xx need not be held.
   */
  complete(): Promise<void> | undefined;
  /** Frees the id so the sender's retry runs the handler, unless the claim's lease has lapsed. */
  release(): Promise<void>;
}

/** How a claim went: the claim to settle, a duplicate, a refusal, or `undefined` to run without one (fail open). */
export type ClaimOutcome = Claim | "duplicate" | WebhookError | undefined;

/**
 * Claims `id` for one delivery: a claim when it was free, `"duplicate"` when it was handled
 * within its ttl, `409 delivery_in_progress` while another delivery holds it, and
 * `503 store_unavailable` when the store fails or is slower than `timeout` (or `undefined`, to
 * run the handler without dedupe, with `failOpen`). A store that answers at once (the memory
 * store) is answered at once, without a promise.
 */
export function claimEvent(
  id: string,
  dedupe: DedupeSettings,
  reporter: Reporter,
  record: DeliveryTelemetry | undefined,
): ClaimOutcome | Promise<ClaimOutcome> {
  // When the lease began, at the latest: once it has run out, the id may be another delivery's.
  const claimedAt = performance.now();
  let answer: ClaimResult | PromiseLike<ClaimResult>;
  try {
    answer = dedupe.store.claim(id, dedupe.inFlightTtl);
  } catch (cause) {
    return unclaimed(cause, dedupe, reporter, record, claimedAt);
  }
  // No closure, no promise on the way when the store answered at once: every delivery takes it.
  if (!isThenable(answer)) return claimed(id, answer, dedupe, reporter, record, claimedAt);
  return claimedLater(answer, id, dedupe, reporter, record, claimedAt);
}

/** A claim the store answers with a promise, bounded by `dedupe.timeout`. */
function claimedLater(
  answer: PromiseLike<ClaimResult>,
  id: string,
  dedupe: DedupeSettings,
  reporter: Reporter,
  record: DeliveryTelemetry | undefined,
  claimedAt: number,
): Promise<ClaimOutcome> {
  const { store, timeout } = dedupe;
  // A claim that lands after we gave up must not block the sender's retry for a lease.
  return withTimeout(
    answer,
    timeout,
    () => slow(timeout),
    (late) => {
      if (late === "claimed") void quietly(() => store.release(id), timeout, reporter);
    },
  ).then(
    (result) => claimed(id, result, dedupe, reporter, record, claimedAt),
    (cause: unknown) => unclaimed(cause, dedupe, reporter, record, claimedAt),
  );
}

/** What a store answered to a claim, as the receiver goes on with it. */
function claimed(
  id: string,
  result: unknown,
  dedupe: DedupeSettings,
  reporter: Reporter,
  record: DeliveryTelemetry | undefined,
  claimedAt: number,
): ClaimOutcome {
  // Anything else would turn dedupe off without a word: a store that answers it is broken.
  if (result !== "claimed" && result !== "in_flight" && result !== "done") {
    const cause = new TypeError(
      `flag-webhooks: the dedupe store's claim() answered ${typeof result === "string" ? JSON.stringify(result) : String(result)}, not "claimed", "in_flight" or "done"`,
    );
    return unclaimed(cause, dedupe, reporter, record, claimedAt);
  }
  record?.store("claim", since(claimedAt));
  if (result === "done") return "duplicate";
  if (result === "in_flight") {
    return new WebhookError("delivery_in_progress", `event ${id} is being handled by another delivery; retry later`);
  }
  return new StoreClaim(id, dedupe, reporter, record, claimedAt);
}

/** A claim the store made: one object a delivery, its methods shared (no closures per claim). */
class StoreClaim implements Claim {
  constructor(
    private readonly id: string,
    private readonly dedupe: DedupeSettings,
    private readonly reporter: Reporter,
    private readonly record: DeliveryTelemetry | undefined,
    private readonly claimedAt: number,
  ) {}

  complete(): Promise<void> | undefined {
    return persist(this.id, this.dedupe, this.reporter, this.record);
  }

  release(): Promise<void> {
    const { id, dedupe } = this;
    // A failure after the lease ran out releases nothing: the claim has lapsed, and the id may
    // now be held by a copy that arrived meanwhile, whose claim must stand.
    // A lease ending at the very instant the clock is read ends either now or a moment later.
    // Stryker disable next-line EqualityOperator: equivalent at that instant.
    if (performance.now() - this.claimedAt >= dedupe.inFlightTtl) return Promise.resolve();
    return quietly(() => dedupe.store.release(id), dedupe.timeout, this.reporter, this.record);
  }
}

/** A claim the store could not make: 503, or no dedupe for this delivery with `failOpen`. */
function unclaimed(
  cause: unknown,
  dedupe: DedupeSettings,
  reporter: Reporter,
  record: DeliveryTelemetry | undefined,
  claimedAt: number,
): ClaimOutcome {
  record?.store("claim", since(claimedAt));
  reporter.report(cause);
  if (dedupe.failOpen) return undefined;
  return new WebhookError("store_unavailable", "the dedupe store is unavailable; retry later", { cause });
}

/** Runs a store operation whose failure must not change the answer (it is reported instead). */
async function quietly(
  operation: () => unknown,
  timeout: number,
  reporter: Reporter,
  record?: DeliveryTelemetry,
): Promise<void> {
  const began = record ? performance.now() : 0;
  try {
    await withTimeout(operation(), timeout, () => slow(timeout));
  } catch (error) {
    reporter.report(error);
  }
  record?.store("release", since(began));
}

/**
 * Marks a handled id done, retrying a failed or slow store within `dedupe.timeout` ms (Redis
 * restarting mid-handler, say): the handler ran, so giving up leaves the id claimed until its
 * lease ends, and a copy delivered after that would run it again. What still fails is reported.
 */
function persist(
  id: string,
  dedupe: DedupeSettings,
  reporter: Reporter,
  record: DeliveryTelemetry | undefined,
): Promise<void> | undefined {
  const began = performance.now();
  let done: unknown;
  try {
    done = dedupe.store.complete(id, dedupe.ttl);
  } catch (error) {
    return retrying(Promise.reject(error), id, dedupe, reporter, record, began);
  }
  // A store that answers at once, and did not fail, needs no retry loop (the memory store).
  if (!isThenable(done)) {
    record?.store("complete", since(began));
    return undefined;
  }
  return retrying(done, id, dedupe, reporter, record, began);
}

/** Marks an id done, the first attempt (`first`) already under way, retrying within `dedupe.timeout` ms. */
async function retrying(
  first: unknown,
  id: string,
  dedupe: DedupeSettings,
  reporter: Reporter,
  record: DeliveryTelemetry | undefined,
  began: number,
): Promise<void> {
  const { store, ttl, timeout: budget } = dedupe;
  const deadline = began + budget;
  for (let attempt = 0; ; attempt++) {
    const left = deadline - performance.now();
    try {
      await withTimeout(attempt === 0 ? first : store.complete(id, ttl), Math.max(1, left), () => slow(budget));
      record?.store("complete", since(began));
      return;
    } catch (error) {
      const pause = Math.min(25 * 2 ** attempt, 250);
      if (deadline - performance.now() <= pause) {
        record?.store("complete", since(began));
        reporter.report(error);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

function slow(ms: number): Error {
  return new Error(`the dedupe store did not answer within ${ms} ms`);
}

/** Seconds since a `performance.now()` reading, as telemetry reports durations. */
export function since(began: number): number {
  return (performance.now() - began) / 1000;
}
