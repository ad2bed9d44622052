// The OpenTelemetry SDK as an app runs it, for the telemetry cases of bench/options.mjs: spans
// through a BatchSpanProcessor and metrics through a PeriodicExportingMetricReader, both to
// exporters that drop what they get (the export itself is the collector's cost, not ours).
// Loaded from the repository's dev dependencies (bench/ resolves up to ../node_modules).
import { context, metrics, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";

const drop = { export: (_items, done) => done({ code: 0 }), shutdown: async () => {}, forceFlush: async () => {} };

/** Providers with the SDK's batch processor and periodic reader; registered globally when asked. */
export function otelSdk({ register = false } = {}) {
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(drop)] });
  const meterProvider = new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter: drop, exportIntervalMillis: 60_000 })],
  });
  if (register) {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(tracerProvider);
    metrics.setGlobalMeterProvider(meterProvider);
  }
  return { tracerProvider, meterProvider };
}
