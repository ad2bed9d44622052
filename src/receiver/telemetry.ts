import type { DeliveryTelemetry, Telemetry } from "../telemetry.js";
import type { Reporter } from "./report.js";

/**
 * Begins the record of one delivery, or `undefined` when there is nothing to record. The
 * recorder's own failures are reported to `onError` and change no answer: telemetry never decides.
 */
export function recorder(telemetry: Telemetry, reporter: Reporter): DeliveryTelemetry | undefined {
  let record: DeliveryTelemetry | undefined;
  try {
    record = telemetry.delivery();
  } catch (error) {
    reporter.report(error);
  }
  if (!record) return undefined;
  const inner = record;
  const safe =
    (name: "verified" | "store" | "handler" | "end") =>
    (...args: unknown[]): void => {
      try {
        (inner[name] as (...args: unknown[]) => void)(...args);
      } catch (error) {
        reporter.report(error);
      }
    };
  return {
    verified: safe("verified"),
    store: safe("store"),
    handler: safe("handler"),
    end: safe("end"),
    run: (handler) => inner.run(handler),
  };
}
