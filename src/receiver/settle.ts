// The one decision of "handled", for every adapter and every store. A delivery is handled when
// its handler finished without throwing and its final answer is 2xx. Then the stores record it
// (a store that holds the handler's effects commits them) before that 2xx may leave; if such a
// store cannot, the answer becomes 503 and nothing is recorded. Anything else undoes the claim,
// and never while the handler still runs: the receiver waits for both the handler and the answer.
import { checkRetention } from "../delivery/replay-window.js";
import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { Enlisted, Participation } from "../store-contract/enlist.js";
import type { DeliveryTelemetry } from "../telemetry.js";
import { errorResponse, isSuccess } from "./answers.js";
import { type Claim, since } from "./claim.js";
import type { Accepted, Answer } from "./protocol.js";
import type { Reporter } from "./report.js";

/** An accepted delivery as the receiver settles it: the adapter's view, and the receiver's own. */
export interface Settlement extends Accepted, Participation {
  /** The handler's result was a store's duplicate or stale answer: recorded as such, not as handled. */
  recordAs(outcome: "duplicate" | "stale"): void;
}

/** An adapter's hook that watches its answer on the wire (`AdapterHooks.watch`), for any context. */
// biome-ignore lint/suspicious/noExplicitAny: the adapter's own context types, carried by the reporter.
type Watch = (accepted: Accepted, ...context: any[]) => boolean;

/**
 * Where a settlement stands. The handler finishing and the final answer come in either order;
 * the decision is taken once both are known, and only once.
 */
type Phase =
  /** The handler runs; no final answer yet. */
  | "running"
  /** The handler finished; the final answer is not known yet (a route still writing it). */
  | "finished"
  /** The final answer is known while the handler still runs (a response-timeout layer answered). */
  | "answered"
  /** Both were known: decided (the commit or release may still be under way). */
  | "decided";

/** Whether a store that enlists can still be part of the decision, as far as the answer on the wire goes. */
type Wire =
  /** Yes: the answer is watched (or written by the receiver itself). */
  | "watched"
  /** Not watched yet: the adapter's late watch is attached at the first store that enlists. */
  | "unwatched"
  /** No: the answer had ended before a store enlisted, and left without waiting; stores decide alone. */
  | "lost";

/**
 * The settlement of one accepted delivery; stores enlist in it while its handler runs.
 *
 * @param claim the dedupe store's claim on the event id, if any.
 * @param reporter where failures go; it carries the delivery's context and telemetry record.
 * @param maxAge the replay window, to check the retention of every store that enlists: one found
 *   through the registry (an inbox called inside `onEvent`) could not be checked when the receiver
 *   was made.
 * @param watch the adapter's watch, when it does not watch this delivery from the start (nothing to
 *   settle was known then): attached at the first store that enlists, since a 2xx must then wait
 *   for it. Only an inbox found through the registry can enlist in such a delivery.
 */
export function settlement(
  event: WebhookEvent,
  claim: Claim | undefined,
  reporter: Reporter,
  maxAge: number | undefined,
  watch: Watch | undefined,
): Settlement {
  return new DeliverySettlement(event, claim, reporter, maxAge, watch);
}

class DeliverySettlement implements Settlement {
  readonly run: <T>(handler: () => T) => T;
  readonly #claim: Claim | undefined;
  readonly #reporter: Reporter;
  readonly #maxAge: number | undefined;
  readonly #watch: Watch | undefined;
  /** The delivery's telemetry record; none once it ended because the client left before any answer. */
  #record: DeliveryTelemetry | undefined;
  readonly #began: number;
  readonly #units: Enlisted[] = [];
  #phase: Phase = "running";
  // Stryker disable next-line StringLiteral: equivalent: the wire is only ever compared with "unwatched" and "lost".
  #wire: Wire = "watched";
  /** What the handler threw, once it finished: `undefined` when it did not throw. */
  #thrown: unknown;
  #status: number | undefined;
  /** What a 2xx is recorded as: a store's duplicate or stale answer is not a handled delivery. */
  #outcome: "handled" | "duplicate" | "stale" = "handled";
  /** The decision's answer to write instead, once asked for: a promise while it waits. */
  #verdict: Answer | undefined | Promise<Answer | undefined>;
  #resolve: (instead: Answer | undefined | Promise<Answer | undefined>) => void = noop;

  constructor(
    readonly event: WebhookEvent,
    claim: Claim | undefined,
    reporter: Reporter,
    maxAge: number | undefined,
    watch: Watch | undefined,
  ) {
    this.#claim = claim;
    this.#reporter = reporter;
    this.#maxAge = maxAge;
    this.#watch = watch;
    if (watch) this.#wire = "unwatched";
    const { record } = reporter;
    this.#record = record;
    this.#began = record ? performance.now() : 0;
    this.run = record ? (handler) => record.run(handler) : runDirectly;
  }

  holdsAnswer(): boolean {
    return this.#claim !== undefined || this.#units.length > 0;
  }

  finished(error?: unknown): void {
    const phase = this.#phase;
    if (phase === "finished" || phase === "decided") return;
    this.#thrown = error;
    this.#record?.handler(since(this.#began), error);
    if (phase === "answered") {
      this.#resolve(this.#decision());
    } else {
      this.#phase = "finished";
    }
  }

  answered(status: number | undefined): Answer | undefined | Promise<Answer | undefined> {
    const phase = this.#phase;
    if (phase === "running") {
      this.#phase = "answered";
      this.#status = status;
      this.#verdict = new Promise((resolve) => {
        this.#resolve = resolve;
      });
    } else if (phase === "finished") {
      // The handler finished first (always, where the receiver writes the answer itself): decide now.
      this.#status = status;
      this.#verdict = this.#decision();
    }
    return this.#verdict;
  }

  recordAs(outcome: "duplicate" | "stale"): void {
    this.#outcome = outcome;
  }

  clientClosed(): void {
    const record = this.#record;
    if (this.#phase === "decided" || !record) return;
    this.#record = undefined;
    record.end("client_closed", undefined);
  }

  enlist(unit: Enlisted): boolean {
    // Once the answer is final, a unit can no longer be part of the decision: the store decides alone.
    if (this.#phase === "answered" || this.#phase === "decided" || this.#wire === "lost") return false;
    checkRetention(unit.retention, this.#maxAge, "the inbox's retention");
    if (this.#wire === "unwatched") {
      // A handler that answered before the store enlisted: that answer has left, and nothing would
      // report it to the decision, which would then never come (the store's transaction left open).
      // Stryker disable next-line OptionalChaining: equivalent: the wire is "unwatched" only when a watch was given.
      if (!this.#watch?.(this, ...this.#reporter.context)) {
        this.#wire = "lost";
        return false;
      }
      // Stryker disable next-line StringLiteral: equivalent: the wire is only ever compared with "unwatched" and "lost".
      this.#wire = "watched";
    }
    this.#units.push(unit);
    return true;
  }

  /**
   * The decision, once the handler finished and the answer is final: the answer to write instead,
   * if any; at once when there was nothing to wait for.
   */
  #decision(): Answer | undefined | Promise<Answer | undefined> {
    this.#phase = "decided";
    if (this.#units.length === 0 && this.#thrown === undefined && isSuccess(this.#status)) {
      // Nothing to commit: mark the claim done, if there is one (a memory store does it at once,
      // and then nothing is made for the decision: no promise, no closure).
      const done = this.#claim?.complete();
      if (done) return done.then(() => this.#handled());
      this.#handled();
      return undefined;
    }
    // Stryker disable next-line BlockStatement,ArrowFunction: unreachable but for a bug: #conclude's steps catch their own failures.
    return this.#conclude().catch((error: unknown) => {
      // Every step of #conclude reports its own failures; this is the net under a bug.
      this.#reporter.report(error);
      return undefined;
    });
  }

  /** A handled delivery's record ends once its stores have recorded it. */
  #handled(): undefined {
    this.#record?.end(this.#outcome, this.#status);
    return undefined;
  }

  async #conclude(): Promise<Answer | undefined> {
    const claim = this.#claim;
    const reporter = this.#reporter;
    const record = this.#record;
    const status = this.#status;
    const thrown = this.#thrown;
    const threw = thrown !== undefined;
    if (!threw && isSuccess(status)) {
      for (const [index, unit] of this.#units.entries()) {
        try {
          await unit.commit();
        } catch (cause) {
          reporter.report(cause);
          await this.#undo(this.#units.slice(index + 1));
          return notRecorded(record);
        }
      }
      await claim?.complete();
      record?.end(this.#outcome, status);
      return undefined;
    }
    await this.#undo(this.#units);
    // A 2xx here is one the handler began before it threw (held until now): it gets the answer of
    // its error instead, since a 2xx must never leave for an event that was not handled.
    const instead = isSuccess(status) ? errorResponse(thrown) : undefined;
    const known = thrown instanceof WebhookError ? thrown : undefined;
    record?.end(
      known?.code ?? "handler_error",
      instead?.status ?? status ?? known?.status ?? (threw ? 500 : undefined),
    );
    return instead;
  }

  async #undo(units: Enlisted[]): Promise<void> {
    for (const unit of units) {
      try {
        await unit.rollback();
      } catch (error) {
        // A unit's rollback never rejects (Enlisted): this is the net under a store's bug.
        this.#reporter.report(error);
      }
    }
    await this.#claim?.release();
  }
}

/**
 * The decision for an event all of whose changes were stale, which no handler runs for: handled,
 * once its unit (the ordered positions) is recorded and its claim marked done; `503
 * store_unavailable` in place of the answer when the unit cannot be.
 */
export async function settleStale(
  ordered: { unit?: Enlisted },
  claim: Claim | undefined,
  reporter: Reporter,
): Promise<Answer | undefined> {
  try {
    // Stryker disable next-line OptionalChaining: equivalent: an event is stale only when it is ordered, with a unit.
    await ordered.unit?.commit();
  } catch (cause) {
    reporter.report(cause);
    await claim?.release();
    return notRecorded(reporter.record);
  }
  await claim?.complete();
  reporter.record?.end("stale", 204);
  return undefined;
}

/**
 * The answer in place of a 2xx when a store could not record a handled event (its failure
 * already reported): `503 store_unavailable`, and the delivery's record ends so.
 */
function notRecorded(record: DeliveryTelemetry | undefined): Answer {
  const error = new WebhookError("store_unavailable", "the store did not record the event; retry later");
  record?.end(error.code, error.status);
  return errorResponse(error);
}

function runDirectly<T>(handler: () => T): T {
  return handler();
}

function noop(): void {}
