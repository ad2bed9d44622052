// The one decision of "handled", for every adapter and every store. A delivery is handled when
// its handler finished without throwing and its final answer is 2xx. Then the stores record it
// (a store that holds the handler's effects commits them) before that 2xx may leave; if such a
// store cannot, the answer becomes 503 and nothing is recorded. Anything else undoes the claim,
// and never while the handler still runs: the receiver waits for both the handler and the answer.
import { checkRetention } from "../delivery/replay-window.js";
import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { Enlisted, Participation } from "../stores/enlist.js";
import type { DeliveryTelemetry } from "../telemetry.js";
import { errorResponse, isSuccess } from "./answers.js";
import { type Claim, since } from "./claim.js";
import type { Accepted, Answer } from "./protocol.js";
import type { Reporter } from "./report.js";

/** An accepted delivery as the receiver settles it: the adapter's view, and the receiver's own. */
export interface Settlement extends Accepted, Participation {
  /** The handler's result was a store's duplicate answer: recorded as such, not as handled. */
  duplicate(): void;
}

/** An adapter's hook that watches its answer on the wire (`AdapterHooks.watch`), for any context. */
// biome-ignore lint/suspicious/noExplicitAny: the adapter's own context types, carried by the reporter.
type Watch = (accepted: Accepted, ...context: any[]) => boolean;

/**
 * The settlement of one accepted delivery; stores enlist in it while its handler runs.
 *
 * @param claim the dedupe store's claim on the event id, if any.
 * @param reporter where failures go; it carries the delivery's context and telemetry record.
 * @param maxAge the replay window, to check the retention of a store that enlists.
 * @param watch an adapter's hook that watches its answer on the wire, when it does not watch this
 *   delivery yet: called at the first enlisting, since a 2xx must then wait for the store.
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
  #watch: Watch | undefined;
  readonly #began: number;
  readonly #units: Enlisted[] = [];
  #done = false;
  #threw = false;
  #thrown: unknown;
  #final = false;
  #status: number | undefined;
  #duplicate = false;
  /** The record ended when the client left before any answer: nothing more is recorded. */
  #closed = false;
  #decided = false;
  /** The answer had ended before the first store enlisted: stores decide alone. */
  #unwatched = false;
  #verdict: Promise<Answer | undefined> | undefined;
  #resolve: (instead: Promise<Answer | undefined>) => void = noop;

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
    const { record } = reporter;
    this.#began = record ? performance.now() : 0;
    this.run = record ? (handler) => record.run(handler) : runDirectly;
  }

  /** The delivery's telemetry record, unless it ended when the client left. */
  get #record(): DeliveryTelemetry | undefined {
    return this.#closed ? undefined : this.#reporter.record;
  }

  holdsAnswer(): boolean {
    return this.#claim !== undefined || this.#units.length > 0;
  }

  finished(error?: unknown): void {
    if (this.#done) return;
    this.#done = true;
    if (error !== undefined) {
      this.#threw = true;
      this.#thrown = error;
    }
    this.#record?.handler(since(this.#began), this.#thrown);
    if (this.#final && !this.#decided) this.#resolve(this.#decision());
  }

  answered(status: number | undefined): Promise<Answer | undefined> {
    if (!this.#final) {
      this.#final = true;
      this.#status = status;
      // The handler finished first (always, where the receiver writes the answer itself): decide now.
      if (this.#done) {
        this.#verdict = this.#decision();
      } else {
        this.#verdict = new Promise((resolve) => {
          this.#resolve = resolve;
        });
      }
    }
    return this.#verdict as Promise<Answer | undefined>;
  }

  duplicate(): void {
    this.#duplicate = true;
  }

  clientClosed(): void {
    if (this.#decided || this.#closed) return;
    this.#closed = true;
    this.#reporter.record?.end("client_closed", undefined);
  }

  enlist(unit: Enlisted): boolean {
    // Once the answer is final, a unit can no longer be part of the decision: the store decides alone.
    if (this.#decided || this.#final || this.#unwatched) return false;
    checkRetention(unit.retention, this.#maxAge, "the inbox's retention");
    const watch = this.#watch;
    if (watch) {
      this.#watch = undefined;
      // A handler that answered before the store enlisted: that answer has left, and nothing would
      // report it to the decision, which would then never come (the store's transaction left open).
      if (!watch(this, ...this.#reporter.context)) {
        this.#unwatched = true;
        return false;
      }
    }
    this.#units.push(unit);
    return true;
  }

  /** The decision, once the handler finished and the answer is final: the answer to write instead, if any. */
  #decision(): Promise<Answer | undefined> {
    this.#decided = true;
    if (this.#units.length === 0 && !this.#threw && isSuccess(this.#status)) {
      // Nothing to commit: mark the claim done, if there is one (a memory store does it at once).
      const record = this.#record;
      const handled = () => {
        record?.end(this.#duplicate ? "duplicate" : "handled", this.#status);
        return undefined;
      };
      const done = this.#claim?.complete();
      return done ? done.then(handled) : Promise.resolve(handled());
    }
    return this.#conclude().catch((error: unknown) => {
      // Every step of #conclude reports its own failures; this is the net under a bug.
      this.#reporter.report(error);
      return undefined;
    });
  }

  async #conclude(): Promise<Answer | undefined> {
    const claim = this.#claim;
    const reporter = this.#reporter;
    const record = this.#record;
    const status = this.#status;
    if (!this.#threw && isSuccess(status)) {
      for (const [index, unit] of this.#units.entries()) {
        try {
          await unit.commit();
        } catch (cause) {
          reporter.report(cause);
          await this.#undo(this.#units.slice(index + 1));
          const error = new WebhookError("store_unavailable", "the store did not record the event; retry later", {
            cause,
          });
          record?.end(error.code, error.status);
          return errorResponse(error);
        }
      }
      await claim?.complete();
      record?.end(this.#duplicate ? "duplicate" : "handled", status);
      return undefined;
    }
    await this.#undo(this.#units);
    // A handler that threw after it began a 2xx answer (held until now) gets the answer of its
    // error instead: a 2xx must never leave for an event that was not handled.
    const instead = this.#threw && isSuccess(status) ? errorResponse(this.#thrown) : undefined;
    const known = this.#thrown instanceof WebhookError ? this.#thrown : undefined;
    record?.end(
      known?.code ?? "handler_error",
      instead?.status ?? status ?? known?.status ?? (this.#threw ? 500 : undefined),
    );
    return instead;
  }

  async #undo(units: Enlisted[]): Promise<void> {
    for (const unit of units) {
      try {
        await unit.rollback();
      } catch (error) {
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
    await ordered.unit?.commit();
  } catch (cause) {
    reporter.report(cause);
    await claim?.release();
    const error = new WebhookError("store_unavailable", "the store did not record the event; retry later", { cause });
    reporter.record?.end(error.code, error.status);
    return errorResponse(error);
  }
  await claim?.complete();
  reporter.record?.end("stale", 204);
  return undefined;
}

function runDirectly<T>(handler: () => T): T {
  return handler();
}

function noop(): void {}
