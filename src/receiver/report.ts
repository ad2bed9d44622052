import type { DeliveryTelemetry } from "../telemetry.js";

/**
 * Where the receiver sends what went wrong during one delivery, and how it calls the user's hooks:
 * `onError` gets the delivery's context after the error, and no hook can change an answer. It
 * also carries the delivery's context and telemetry record through the checks: one object a
 * delivery, the fewest the hot path can make.
 */
export class Reporter {
  /** The delivery's telemetry record, when telemetry is on (set once the record begins). */
  record: DeliveryTelemetry | undefined;

  constructor(
    // biome-ignore lint/suspicious/noExplicitAny: onError takes the adapter's own context types after the error.
    private readonly onError: (error: unknown, ...context: any[]) => void,
    readonly context: readonly unknown[],
  ) {}

  /** Tells `onError`; an `onError` that throws has nowhere left to report to. */
  report(error: unknown): void {
    try {
      this.onError(error, ...this.context);
    } catch {
      // Nowhere left to report to.
    }
  }

  /** Runs a hook for logs or metrics (`onVerified`, `onRejected`): whatever it throws is reported. */
  tell(hook: () => void): void {
    try {
      hook();
    } catch (error) {
      this.report(error);
    }
  }
}

/**
 * The default `onError`: one line, so a log collector keeps it whole. The name and message only;
 * an `onError` of your own gets the error itself, stack and cause included.
 */
export function logError(error: unknown): void {
  console.error(`flag-webhooks: ${describeError(error)} (onEvent, a hook or the dedupe store failed)`);
}

/** An error as one line: its name and message, newlines folded. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `thrown value: ${String(error as string)}`;
  // Stryker disable next-line Regex: equivalent: the \s* around [\r\n] take any further line breaks.
  return text.replace(/\s*[\r\n]+\s*/g, " ");
}
