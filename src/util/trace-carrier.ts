// A trace context stored beside a message (a BullMQ job's metadata, a kept event's row) as JSON
// text fields, written by the app's telemetry: read back without trusting it, since anything
// could have been stored there.

/** The string fields of `stored` (JSON text); undefined when it is not a JSON object. */
export function readCarrier(stored: unknown): Record<string, string> | undefined {
  if (typeof stored !== "string") return undefined;
  try {
    const fields = Object.entries(JSON.parse(stored) as object);
    return Object.fromEntries(fields.filter(([, value]) => typeof value === "string"));
  } catch {
    return undefined;
  }
}

/** `carrier` as the JSON text to store; undefined when it carries nothing (no SDK, no active span). */
export function storedCarrier(carrier: Record<string, string>): string | undefined {
  return Object.keys(carrier).length === 0 ? undefined : JSON.stringify(carrier);
}
