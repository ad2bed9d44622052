// The trace context across a queue, in W3C Trace Context form (`traceparent`, `tracestate`),
// written and read here when the app's propagator does not: `propagation.inject` is a no-op until
// an SDK registers a propagator, and a manual set-up (a tracer provider and a context manager,
// no propagator) would otherwise start a new trace in the worker.
import {
  type Context,
  createTraceState,
  isSpanContextValid,
  propagation,
  type SpanContext,
  TraceFlags,
  trace,
} from "@opentelemetry/api";

const TRACEPARENT = "traceparent";
const TRACESTATE = "tracestate";
// version-traceId-parentId-flags (W3C Trace Context, section 3.2), lowercase hex; a later
// version may append fields after a "-", version 00 may not.
const TRACEPARENT_FORMAT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The context of `active` as text fields: the registered propagator's, plus a W3C `traceparent`
 * (and `tracestate`) of the active span when that propagator wrote none.
 */
export function injectContext(active: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(active, carrier);
  if (carrier[TRACEPARENT] === undefined) {
    const span = trace.getSpanContext(active);
    if (span && isSpanContextValid(span)) {
      const flags = span.traceFlags & TraceFlags.SAMPLED ? "01" : "00";
      carrier[TRACEPARENT] = `00-${span.traceId}-${span.spanId}-${flags}`;
      const state = span.traceState?.serialize();
      if (state) carrier[TRACESTATE] = state;
    }
  }
  return carrier;
}

/**
 * `active` with the remote parent `carrier` holds: as the registered propagator reads it, or, when
 * it finds no span context there (none is registered), from the carrier's W3C `traceparent`.
 */
export function extractContext(active: Context, carrier: Record<string, string>): Context {
  const extracted = propagation.extract(active, carrier);
  if (trace.getSpanContext(extracted) !== trace.getSpanContext(active)) return extracted;
  const remote = parseTraceparent(carrier[TRACEPARENT], carrier[TRACESTATE]);
  return remote ? trace.setSpanContext(extracted, remote) : extracted;
}

/** The span context a `traceparent` names, or undefined for one W3C Trace Context refuses. */
function parseTraceparent(traceparent: string | undefined, tracestate: string | undefined): SpanContext | undefined {
  const match = TRACEPARENT_FORMAT.exec(traceparent?.trim() ?? "");
  if (!match || match[1] === "ff" || (match[1] === "00" && match[5] !== undefined)) return undefined;
  const context: SpanContext = {
    traceId: match[2] as string,
    spanId: match[3] as string,
    traceFlags: Number.parseInt(match[4] as string, 16) & TraceFlags.SAMPLED,
    isRemote: true,
    ...(tracestate ? { traceState: createTraceState(tracestate) } : {}),
  };
  return isSpanContextValid(context) ? context : undefined;
}
