import { createRequire } from "node:module";
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

/**
 * The real OpenTelemetry SDK as an app registers it, exporting to memory: a tracer provider with
 * an in-memory span exporter, a meter provider whose reader exports deltas to an in-memory metric
 * exporter, the AsyncLocalStorage context manager, the W3C propagator, and
 * `@opentelemetry/instrumentation-http` on Node's http server (the parent of every delivery span).
 */
export interface Sdk {
  spans: InMemorySpanExporter;
  tracerProvider: BasicTracerProvider;
  meterProvider: MeterProvider;
  /** The metric points recorded since the last call, by instrument name. */
  points(): Promise<Map<string, DataPoint<unknown>[]>>;
  /**
   * Waits until `count` spans named `name` (or matching it) have ended: the receive span ends
   * after the answer.
   */
  ended(name: string | ((span: ReadableSpan) => boolean), count?: number): Promise<ReadableSpan[]>;
  shutdown(): Promise<void>;
}

export function startSdk(): Sdk {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const metrics = new InMemoryMetricExporter(AggregationTemporality.DELTA);
  const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  const http = new HttpInstrumentation();
  http.setTracerProvider(tracerProvider);
  http.enable();
  // The instrumentation patches node:http when it is required; the servers' prototypes are shared
  // with every ES module import of it.
  createRequire(import.meta.url)("node:http");

  return {
    spans,
    tracerProvider,
    meterProvider,
    async points() {
      await reader.forceFlush();
      const found = new Map<string, DataPoint<unknown>[]>();
      for (const resource of metrics.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          for (const metric of scope.metrics) {
            const list = found.get(metric.descriptor.name) ?? [];
            list.push(...(metric.dataPoints as DataPoint<unknown>[]).filter((point) => hasValue(point.value)));
            found.set(metric.descriptor.name, list);
          }
        }
      }
      metrics.reset();
      return found;
    },
    async ended(name, count = 1) {
      const matches = typeof name === "string" ? (span: ReadableSpan) => span.name === name : name;
      for (let i = 0; i < 200; i++) {
        const found = spans.getFinishedSpans().filter(matches);
        if (found.length >= count) return found;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      throw new Error(
        `${count} span(s) ${typeof name === "string" ? `named ${name}` : "matching"} did not end within a second`,
      );
    },
    async shutdown() {
      http.disable();
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
      contextManager.disable();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** A delta point that recorded something (a delta reader also reports instruments left idle). */
function hasValue(value: unknown): boolean {
  if (typeof value === "number") return value !== 0;
  return (value as { count?: number }).count !== 0;
}
