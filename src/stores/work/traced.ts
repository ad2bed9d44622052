// The attempts of kept events as telemetry sees them: each one run inside the span the inbox's
// `telemetry` starts in the trace of the delivery that brought the event (its context kept with
// the row when it was enqueued), and told how it ended. Without `telemetry`, an attempt runs as it is.
import { parseEvent, type WebhookEvent } from "../../events.js";
import type { InboxTelemetry } from "../../telemetry.js";
import { readCarrier, storedCarrier } from "../../util/trace-carrier.js";
import { attempt, type Ground, type Outcome, type Plan, type Taken } from "./attempt.js";
import type { KeptHandler } from "./types.js";

/** The trace context to keep with an event being enqueued: JSON text fields, or null with nothing to carry. */
export function traceToKeep(telemetry: InboxTelemetry | undefined): string | null {
  return telemetry ? (storedCarrier(telemetry.inject()) ?? null) : null;
}

/**
 * Runs the attempt of a taken event: as {@link attempt} does, inside the telemetry's span when
 * the plan has one. A taken event the take parked (its last attempt ended without a result: the
 * worker that ran it stopped) is reported as parked, with no run.
 */
export async function tracedAttempt<Tx>(
  ground: Ground,
  plan: Plan,
  taken: Taken,
  fn: KeptHandler<Tx>,
): Promise<Outcome> {
  const { telemetry } = plan;
  const parked = taken.state === "parked";
  if (!telemetry) return parked ? "parked" : attempt(ground, plan, taken, fn);
  let event: WebhookEvent | undefined;
  let error: unknown;
  try {
    event = parseEvent(taken.body);
  } catch (refused) {
    error = refused;
  }
  let signal: AbortSignal | undefined;
  const watched: KeptHandler<Tx> = async (kept, tx, info) => {
    signal = info.signal;
    try {
      return await fn(kept, tx, info);
    } catch (thrown) {
      error = thrown;
      throw thrown;
    }
  };
  const kept = { event, id: taken.id, attempt: taken.attempt };
  const result = await telemetry.attempt(readCarrier(taken.trace), kept, async () => {
    if (parked) return { outcome: "parked" };
    const outcome = await attempt(ground, plan, taken, watched);
    // A handler cut off at its deadline may never throw: the deadline is then the reason.
    if (error === undefined && signal?.aborted) error = signal.reason;
    return outcome === "done" || outcome === "lost" || error === undefined ? { outcome } : { outcome, error };
  });
  return result.outcome;
}
