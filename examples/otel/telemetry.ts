// OpenTelemetry for the receiver, set up as an app would before it serves requests. A real app
// exports with OTLP (@opentelemetry/exporter-trace-otlp-http) or uses @opentelemetry/sdk-node;
// this one prints to the console, or exports wherever the caller says (the test keeps both in memory).
import { createRequire } from "node:module";
import { context, metrics, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";

export interface TelemetryExporters {
  spans?: SpanExporter;
  metrics?: PushMetricExporter;
}

/** Registers the SDK globally (tracer, meter, context, W3C propagation, HTTP server spans). */
export function startTelemetry(exporters: TelemetryExporters = {}): {
  flush(): Promise<void>;
  shutdown(): Promise<void>;
} {
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(exporters.spans ?? new ConsoleSpanExporter())],
  });
  const meterProvider = new MeterProvider({
    readers: [
      new PeriodicExportingMetricReader({
        exporter: exporters.metrics ?? new ConsoleMetricExporter(),
        exportIntervalMillis: 10_000,
      }),
    ],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  const http = new HttpInstrumentation();
  http.enable();
  // The instrumentation patches node:http as it is next required: do it now, so servers made by
  // modules loaded earlier get HTTP server spans too (with `node --import` this is not needed).
  createRequire(import.meta.url)("node:http");
  return {
    async flush() {
      await tracerProvider.forceFlush();
      await meterProvider.forceFlush();
    },
    async shutdown() {
      http.disable();
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
    },
  };
}
