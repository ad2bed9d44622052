// The trace context across the BullMQ hand-off, kept apart from bullmq.ts: enqueueTo
// stores the active context with each job, processEvents continues it in the worker. Only when a
// `telemetry` option is given; the job's data stays the event either way.
import type { Job, JobsOptions } from "bullmq";
import type { WebhookEvent } from "../events.js";
import type { QueueTelemetry } from "../telemetry.js";
import { readCarrier, storedCarrier } from "../util/trace-carrier.js";

/**
 * Job options that carry the active trace context: as JSON text fields (W3C `traceparent`,
 * `tracestate`) in `opts.telemetry.metadata`, the field BullMQ keeps for context propagation
 * (where its own telemetry, `bullmq-otel`, puts the same JSON), so `job.data` is the event alone.
 */
export function withTraceContext(telemetry: QueueTelemetry, options: JobsOptions): JobsOptions {
  const metadata = storedCarrier(telemetry.inject());
  if (metadata === undefined) return options;
  return { ...options, telemetry: { ...options.telemetry, metadata } };
}

/**
 * Runs a job's handler in the span that continues the trace its job carries (retries included),
 * told the event read from the job (its data may hold more than the event: a signature).
 */
export function processTraced<T>(
  telemetry: QueueTelemetry,
  job: Job<unknown>,
  event: WebhookEvent,
  handler: () => Promise<T>,
): Promise<T> {
  return telemetry.process(
    readCarrier(job.opts?.telemetry?.metadata),
    { event, id: job.id, attempt: job.attemptsMade + 1 },
    handler,
  );
}

/** Whether a `telemetry` option is ours (a {@link QueueTelemetry}) rather than BullMQ's own. */
export function isQueueTelemetry(value: unknown): value is QueueTelemetry {
  return typeof (value as Partial<QueueTelemetry> | undefined)?.process === "function";
}
