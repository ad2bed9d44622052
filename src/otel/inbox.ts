// What a keep-then-work inbox holds, as OpenTelemetry gauges: read from `inbox.counts()` each time
// the SDK collects, so the figures are the database's (every process's workers), not this one's.
import { type Attributes, type MeterProvider, metrics } from "@opentelemetry/api";
import type { InboxCounts } from "../stores/work/types.js";

/** Options of {@link observeInbox}. */
export interface ObserveInboxOptions {
  /** Where the gauges go. Default: the global meter provider (the one the SDK registers). */
  meterProvider?: MeterProvider;
  /** Attributes of every point, to tell inboxes apart: `{ "flag_webhooks.inbox.scope": "billing" }`. */
  attributes?: Attributes;
  /** The clock the oldest event's age is measured by, in ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** An inbox that can say what it holds: a `PostgresInbox` or `SqliteInbox`. */
export interface CountedInbox {
  counts(): Promise<InboxCounts>;
}

/**
 * Reports what a keep-then-work inbox holds, each time metrics are collected:
 * `flag_webhooks.inbox.pending` (events waiting for an attempt), `flag_webhooks.inbox.running`
 * (taken by a worker), `flag_webhooks.inbox.parked` (attempts spent: they wait for a replay), and
 * `flag_webhooks.inbox.oldest_age` (seconds since the oldest pending or running event was
 * received; 0 when none waits). One statement per collection; when the database cannot answer,
 * that collection has no points. Returns a function that stops reporting.
 *
 * @example
 * ```ts
 * const stop = observeInbox(inbox, { attributes: { "flag_webhooks.inbox.scope": "billing" } });
 * ```
 */
export function observeInbox(inbox: CountedInbox, options: ObserveInboxOptions = {}): () => void {
  if (typeof inbox?.counts !== "function") {
    throw new TypeError("flag-webhooks: observeInbox() takes a PostgresInbox or SqliteInbox");
  }
  const { attributes = {}, now = Date.now } = options;
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter("flag-webhooks");
  const gauge = (name: string, description: string, unit = "{event}") =>
    meter.createObservableGauge(`flag_webhooks.inbox.${name}`, { description, unit });
  const pending = gauge("pending", "Kept events waiting for their next attempt");
  const running = gauge("running", "Kept events a worker has taken");
  const parked = gauge("parked", "Kept events whose attempts are spent, waiting for a replay or a purge");
  const age = gauge("oldest_age", "Seconds since the oldest pending or running event was received", "s");
  const observe = async (result: {
    observe(instrument: typeof pending, value: number, attributes?: Attributes): void;
  }) => {
    let counts: InboxCounts;
    try {
      counts = await inbox.counts();
    } catch {
      // The database did not answer: no points this time, rather than zeros that would say all is well.
      return;
    }
    result.observe(pending, counts.pending, attributes);
    result.observe(running, counts.running, attributes);
    result.observe(parked, counts.parked, attributes);
    const oldest = counts.oldestWaitingSince;
    result.observe(age, oldest === null ? 0 : Math.max(0, (now() - oldest) / 1000), attributes);
  };
  const instruments = [pending, running, parked, age];
  meter.addBatchObservableCallback(observe, instruments);
  return () => meter.removeBatchObservableCallback(observe, instruments);
}
