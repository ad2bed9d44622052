// The one decision of "handled", for every adapter and every store. A delivery is handled when
// its handler finished without throwing and its final answer is 2xx. Then the stores record it
// (a store that holds the handler's effects commits them) before that 2xx may leave; if such a
// store cannot, the answer becomes 503 and nothing is recorded. Anything else undoes the claim,
// and never while the handler still runs: the receiver waits for both the handler and the answer.
import { checkRetention } from "../delivery/replay-window.js";
import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { DeliveryTelemetry } from "../telemetry.js";
import { errorResponse, isSuccess } from "./answers.js";
import { type Claim, since } from "./claim.js";
import { deliver, type Enlisted } from "./enlist.js";
import type { Accepted, Answer } from "./protocol.js";
import type { Reporter } from "./report.js";

/** What a settlement needs to know of its delivery. */
export interface SettlementParts {
  /** The dedupe store's claim on the event id, if any. */
  claim: Claim | undefined;
  record: DeliveryTelemetry | undefined;
  reporter: Reporter;
  /** The replay window, to check the retention of a store that enlists. */
  maxAge: number | undefined;
  /**
   * For an adapter that watches its answer on the wire: starts watching, if it is not already
   * (a store enlisted, so a 2xx must now wait for its commit).
   */
  watch: ((accepted: Accepted) => void) | undefined;
  /** Whether the adapter already watches this delivery's answer. */
  watched: boolean;
}

/** An accepted delivery as the receiver settles it: the adapter's view, and the receiver's own. */
export interface Settlement extends Accepted {
  /** The handler's result was a store's duplicate answer: recorded as such, not as handled. */
  duplicate(): void;
}

/** The settlement of one accepted delivery; stores enlist in it while its handler runs. */
export function settlement(event: WebhookEvent, parts: SettlementParts): Settlement {
  const { claim, record, reporter } = parts;
  const began = record ? performance.now() : 0;
  const units: Enlisted[] = [];
  let watched = parts.watched;
  let done = false;
  let threw = false;
  let thrown: unknown;
  let final = false;
  let status: number | undefined;
  let duplicate = false;
  let decided = false;
  let resolve: (instead: Answer | undefined) => void = noop;
  let verdict: Promise<Answer | undefined> | undefined;

  const self: Settlement = {
    event,
    run: record ? (handler) => record.run(handler) : runDirectly,
    holdsAnswer: () => claim !== undefined || units.length > 0,
    finished(error?: unknown) {
      if (done) return;
      done = true;
      if (error !== undefined) {
        threw = true;
        thrown = error;
      }
      record?.handler(since(began), thrown);
      decide();
    },
    answered(answer) {
      if (!final) {
        final = true;
        status = answer;
        verdict = new Promise((settled) => {
          resolve = settled;
        });
        decide();
      }
      return verdict as Promise<Answer | undefined>;
    },
    duplicate() {
      duplicate = true;
    },
  };

  deliver(event, {
    enlist(unit) {
      // Past the decision, or once the answer is final, a unit can no longer be part of it: the
      // store decides alone.
      if (decided || final) return false;
      checkRetention(unit.retention, parts.maxAge, "the inbox's retention");
      units.push(unit);
      if (!watched && parts.watch) {
        watched = true;
        parts.watch(self);
      }
      return true;
    },
  });
  return self;

  function decide(): void {
    if (!done || !final || decided) return;
    decided = true;
    void conclude().then(resolve, (error: unknown) => {
      // Every step below reports its own failures; this is the net under a bug.
      reporter.report(error);
      resolve(undefined);
    });
  }

  async function conclude(): Promise<Answer | undefined> {
    if (!threw && isSuccess(status)) {
      for (const [index, unit] of units.entries()) {
        try {
          await unit.commit();
        } catch (cause) {
          reporter.report(cause);
          await undo(units.slice(index + 1));
          const error = new WebhookError("store_unavailable", "the store did not record the event; retry later", {
            cause,
          });
          record?.end(error.code, error.status);
          return errorResponse(error);
        }
      }
      await claim?.complete();
      record?.end(duplicate ? "duplicate" : "handled", status);
      return undefined;
    }
    await undo(units);
    // A handler that threw after it began a 2xx answer (held until now) gets the answer of its
    // error instead: a 2xx must never leave for an event that was not handled.
    const instead = threw && isSuccess(status) ? errorResponse(thrown) : undefined;
    const known = thrown instanceof WebhookError ? thrown : undefined;
    record?.end(
      known?.code ?? "handler_error",
      instead?.status ?? status ?? known?.status ?? (threw ? 500 : undefined),
    );
    return instead;
  }

  async function undo(undone: Enlisted[]): Promise<void> {
    for (const unit of undone) {
      try {
        await unit.rollback();
      } catch (error) {
        reporter.report(error);
      }
    }
    await claim?.release();
  }
}

function runDirectly<T>(handler: () => T): T {
  return handler();
}

function noop(): void {}
