// flag-webhooks/otel: OpenTelemetry traces and metrics of every delivery.
// @opentelemetry/api is this entry's optional peer: the core and the other entries never import it.
import {
  type Attributes,
  type Context,
  type Counter,
  context,
  createNoopMeter,
  type Histogram,
  type MeterProvider,
  metrics,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import type { WebhookEvent } from "../events.js";
import type {
  DeliveryTelemetry,
  InboxTelemetry,
  KeptAttemptResult,
  QueueTelemetry,
  StoreOperation,
  Telemetry,
} from "../telemetry.js";
import { extractContext, injectContext } from "./trace-context.js";

/** Options of {@link openTelemetry}. */
export interface OpenTelemetryOptions {
  /** Where spans go. Default: the global tracer provider (the one the SDK registers). */
  tracerProvider?: TracerProvider;
  /**
   * Where metrics go. Default: the global meter provider, as it is at the first delivery (register
   * the SDK before the server takes requests).
   */
  meterProvider?: MeterProvider;
}

/**
 * What {@link openTelemetry} returns: the `telemetry` option of every adapter, of `enqueueTo` and
 * `processEvents`, and of a keep-then-work inbox's `enqueue()` and `work()`.
 */
export interface OpenTelemetry extends Telemetry, QueueTelemetry, InboxTelemetry {}

/** The names of what is emitted, as docs/observability.md lists them. */
const NAME = "flag-webhooks";
const RECEIVE = "flag-webhooks.receive";
const PROCESS = "flag-webhooks.process";
const ATTR = {
  id: "flag_webhooks.event.id",
  type: "flag_webhooks.event.type",
  environment: "flag_webhooks.event.environment",
  outcome: "flag_webhooks.outcome",
  secretIndex: "flag_webhooks.secret_index",
  operation: "flag_webhooks.store.operation",
  attempt: "flag_webhooks.job.attempt",
  jobId: "messaging.message.id",
  status: "http.response.status_code",
} as const;
/** Seconds, as OpenTelemetry's semantic conventions bucket HTTP durations. */
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

interface Instruments {
  /** Whether the meter is the API's no-op one (no SDK registered): nothing to record. */
  noop: boolean;
  deliveries: Counter;
  verified: Counter;
  handler: Histogram;
  store: Histogram;
  attempts: Counter;
}

/**
 * OpenTelemetry for a receiver, the BullMQ hand-off and a keep-then-work inbox's `enqueue()` and
 * `work()`: pass it as `telemetry`. Each
 * delivery is one span, `flag-webhooks.receive`, a child of the active span (the HTTP server
 * span of `@opentelemetry/instrumentation-http`, say), with the event's id, type and environment,
 * the secret index that verified it, the outcome and the status answered; status ERROR for a
 * refusal (a duplicate is not one) and for a handler that failed, whose exception is recorded.
 * The handler runs inside that span, so its own spans nest. Metrics: `flag_webhooks.deliveries`,
 * `flag_webhooks.verifications`, `flag_webhooks.handler.duration` and
 * `flag_webhooks.store.duration` (seconds), and `flag_webhooks.inbox.attempts` (a kept event's
 * attempts, by outcome: each one a `flag-webhooks.process` span of its delivery's trace). Never a
 * secret, a signature or a body. With
 * `@opentelemetry/api` installed but no SDK registered, it does next to nothing.
 *
 * @example
 * ```ts
 * import express from "express";
 * import { webhookMiddleware } from "flag-webhooks/express";
 * import { openTelemetry } from "flag-webhooks/otel";
 *
 * const app = express();
 * app.post(
 *   "/webhooks",
 *   webhookMiddleware({ secret: process.env.WEBHOOK_SECRET!, telemetry: openTelemetry(), onEvent: (event) => console.log(event.type) }),
 * );
 * ```
 */
export function openTelemetry(options: OpenTelemetryOptions = {}): OpenTelemetry {
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(NAME);
  let instruments: Instruments | undefined;
  return {
    delivery() {
      // The instruments are made at the first delivery, when the app has registered its SDK.
      instruments ??= createInstruments(options.meterProvider ?? metrics.getMeterProvider());
      // No SDK: nothing would be kept, so the receiver works as it does without telemetry.
      if (instruments.noop && options.tracerProvider === undefined && noTracer()) return undefined;
      return recordDelivery(tracer, instruments);
    },
    inject: () => injectContext(context.active()),
    process: (carrier, { event, id, attempt }, handler) =>
      processJob(
        tracer,
        carrier,
        { ...eventAttributes(event), [ATTR.attempt]: attempt, ...(id === undefined ? {} : { [ATTR.jobId]: id }) },
        handler,
      ),
    attempt(carrier, { event, id, attempt }, run) {
      instruments ??= createInstruments(options.meterProvider ?? metrics.getMeterProvider());
      const attributes = { ...(event ? eventAttributes(event) : { [ATTR.id]: id }), [ATTR.attempt]: attempt };
      return processJob(tracer, carrier, attributes, run, keptOutcome(instruments.attempts, event));
    },
  };
}

function createInstruments(provider: MeterProvider): Instruments {
  const m = provider.getMeter(NAME);
  const advice = { explicitBucketBoundaries: SECONDS };
  return {
    noop: m.constructor === createNoopMeter().constructor,
    deliveries: m.createCounter("flag_webhooks.deliveries", {
      description: "Deliveries received, by outcome (handled, duplicate, or the error code answered) and event type",
      unit: "{delivery}",
    }),
    verified: m.createCounter("flag_webhooks.verifications", {
      description: "Authentic deliveries, by the index of the secret that verified them (rotation progress)",
      unit: "{delivery}",
    }),
    handler: m.createHistogram("flag_webhooks.handler.duration", {
      description: "How long the handler took, by event type and outcome",
      unit: "s",
      advice,
    }),
    store: m.createHistogram("flag_webhooks.store.duration", {
      description: "How long the dedupe store took, by operation (claim, complete, release)",
      unit: "s",
      advice,
    }),
    attempts: m.createCounter("flag_webhooks.inbox.attempts", {
      description: "Attempts of kept events by the inbox's workers, by outcome (done, failed, parked) and event type",
      unit: "{attempt}",
    }),
  };
}

/** One delivery's span and metrics; undefined when neither would be kept. */
function recordDelivery(tracer: Tracer, recorded: Instruments): DeliveryTelemetry | undefined {
  const parent = context.active();
  const span = tracer.startSpan(RECEIVE, { kind: SpanKind.INTERNAL }, parent);
  if (recorded.noop && !span.isRecording()) return undefined;
  const inside = trace.setSpan(parent, span);
  let type: string | undefined;
  let handlerSeconds: number | undefined;
  return {
    verified(event, secretIndex) {
      type = event.type;
      span.setAttributes({ ...eventAttributes(event), [ATTR.secretIndex]: secretIndex });
      recorded.verified.add(1, { [ATTR.secretIndex]: secretIndex });
    },
    store(operation: StoreOperation, seconds) {
      recorded.store.record(seconds, { [ATTR.operation]: operation });
    },
    run: (handler) => context.with(inside, handler),
    handler(seconds, error) {
      handlerSeconds = seconds;
      if (error !== undefined) recordError(span, error);
    },
    end(outcome, status) {
      span.setAttribute(ATTR.outcome, outcome);
      if (status !== undefined) span.setAttribute(ATTR.status, status);
      if (outcome !== "handled" && outcome !== "duplicate" && outcome !== "stale")
        span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      const attributes: Attributes =
        type === undefined ? { [ATTR.outcome]: outcome } : { [ATTR.outcome]: outcome, [ATTR.type]: type };
      recorded.deliveries.add(1, attributes);
      if (handlerSeconds !== undefined) recorded.handler.record(handlerSeconds, attributes);
      span.end();
    },
  };
}

/**
 * A queued job's run, or a kept event's attempt, in a span of the trace its delivery began
 * (`carrier`, when it has one); `ended` tells the span what the run resolved with.
 */
function processJob<T>(
  tracer: Tracer,
  carrier: Record<string, string> | undefined,
  attributes: Attributes,
  handler: () => Promise<T>,
  ended?: (span: Span, value: T) => void,
): Promise<T> {
  const parent: Context = carrier ? extractContext(context.active(), carrier) : context.active();
  const span = tracer.startSpan(PROCESS, { kind: SpanKind.CONSUMER, attributes }, parent);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      const value = await handler();
      ended?.(span, value);
      return value;
    } catch (error) {
      recordError(span, error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: "handler_error" });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * The end of a kept event's attempt: its outcome on the span and counted (a lost one, which ran
 * nothing, is not); a failed or parked one is an error of the span, with its cause when known.
 */
function keptOutcome(counter: Counter, event: WebhookEvent | undefined) {
  return (span: Span, { outcome, error }: KeptAttemptResult) => {
    span.setAttribute(ATTR.outcome, outcome);
    if (outcome === "failed" || outcome === "parked") {
      if (error !== undefined) recordError(span, error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    }
    if (outcome !== "lost") counter.add(1, { [ATTR.outcome]: outcome, ...(event && { [ATTR.type]: event.type }) });
  };
}

/** The API's own no-op tracer provider: what the global one delegates to until an SDK registers. */
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate();

/** Whether no SDK registered a global tracer provider (spans would all be no-ops). */
function noTracer(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider && provider.getDelegate() === NOOP_TRACER_PROVIDER;
}

function eventAttributes(event: WebhookEvent): Attributes {
  return { [ATTR.id]: event.id, [ATTR.type]: event.type, [ATTR.environment]: event.environment };
}

/** The handler's exception, as OpenTelemetry records one: its type, message and stack. */
function recordError(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : { name: typeof error, message: String(error) });
}

export { type CountedInbox, type ObserveInboxOptions, observeInbox } from "./inbox.js";
