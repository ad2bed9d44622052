import { WebhookError } from "./errors.js";
import { assertPayload, bytesOf, type Payload } from "./payload.js";

/** The fields every delivery carries (spec section 2, "Event payload"). */
interface Envelope<Type extends string, Data> {
  /** Event id; the same id is the same event (use it to drop duplicates). */
  id: string;
  /** Event type, the discriminant of {@link WebhookEvent}. */
  type: Type;
  /** When the event happened, an ISO 8601 UTC timestamp. It is not covered by any signed time. */
  createdAt: string;
  /** The environment key the event belongs to. */
  environment: string;
  data: Data;
}

/** One changed field of a flag in a `flag.updated` event. */
export interface FlagChange {
  /** The changed field, e.g. a dotted path such as `"on"` or `"rollout.percent"`. */
  path: string;
  /** The previous value, any JSON value. */
  from: unknown;
  /** The new value, any JSON value. */
  to: unknown;
}

/** Who made a change. */
export interface Actor {
  /** A kind of actor, e.g. `"user"`. The spec lists no fixed set. */
  type: string;
  /** The actor's e-mail address. */
  email: string;
}

/**
 * Data of an event type whose payload the service does not document: an object whose fields
 * are unknown, to be checked before use rather than trusted from a guessed type.
 */
export type UndocumentedData = { readonly [field: string]: unknown };

/** State, rules or variations of a flag changed. */
export type FlagUpdatedEvent = Envelope<"flag.updated", { flag: string; changes: FlagChange[]; actor: Actor }>;
/** A flag was created. Its data is not documented by the service. */
export type FlagCreatedEvent = Envelope<"flag.created", UndocumentedData>;
/** A flag was deleted. Its data is not documented by the service. */
export type FlagDeletedEvent = Envelope<"flag.deleted", UndocumentedData>;
/** A scheduled rollout advanced. Its data is not documented by the service. */
export type RolloutStepEvent = Envelope<"rollout.step", UndocumentedData>;
/** A guard paused or rolled back a rollout. Its data is not documented by the service. */
export type RolloutGuardTriggeredEvent = Envelope<"rollout.guard_triggered", UndocumentedData>;

/** The event types this version of flag-webhooks knows. */
export type KnownWebhookEvent =
  | FlagUpdatedEvent
  | FlagCreatedEvent
  | FlagDeletedEvent
  | RolloutStepEvent
  | RolloutGuardTriggeredEvent;

/**
 * An authentic event of a type this version does not know yet (the service adds types).
 * Its `type` is the literal `"unknown"` so that `switch (event.type)` still narrows the known
 * types; the type the service sent is kept in `originalType`.
 */
export interface UnknownWebhookEvent extends Envelope<"unknown", unknown> {
  /** The `type` field exactly as the service sent it, e.g. `"flag.archived"`. */
  originalType: string;
}

/**
 * A parsed, validated delivery: a union discriminated on `type`.
 *
 * @example
 * ```ts
 * switch (event.type) {
 *   case "flag.updated":
 *     for (const change of event.data.changes) console.log(change.path, change.from, change.to);
 *     break;
 *   case "unknown":
 *     console.log("new event type", event.originalType);
 * }
 * ```
 */
export type WebhookEvent = KnownWebhookEvent | UnknownWebhookEvent;

/** The `type` of every known event. */
export type WebhookEventType = KnownWebhookEvent["type"];

const KNOWN_TYPES: ReadonlySet<string> = new Set<WebhookEventType>([
  "flag.updated",
  "flag.created",
  "flag.deleted",
  "rollout.step",
  "rollout.guard_triggered",
]);

// ISO 8601 date-time with a zone: the spec says createdAt is a UTC timestamp; an offset form is
// still accepted because it names an exact instant too.
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

// Node 20's TextDecoder is several times slower with fatal: true (measured: 10-20 µs on a 2 KiB
// body), so bytes are decoded leniently and only re-checked strictly when the lenient result
// holds U+FFFD, which an authentic body hardly ever does.
const lenient = new TextDecoder();
const strict = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses and validates the body of a delivery whose signature was already verified, and returns
 * the typed event. Extra fields are kept. Throws {@link WebhookError} `invalid_payload` (400)
 * with a message naming the field at fault. Never call it on an unverified body: use
 * {@link verifyEvent}, which verifies first.
 *
 * @example
 * ```ts
 * if (await verifySignature({ secret, payload: raw, signature })) {
 *   const event = parseEvent(raw);
 * }
 * ```
 */
export function parseEvent(payload: Payload): WebhookEvent {
  assertPayload(payload);
  let text: string;
  if (typeof payload === "string") {
    text = payload;
  } else {
    const bytes = bytesOf(payload);
    text = lenient.decode(bytes);
    if (text.includes("\uFFFD")) {
      try {
        text = strict.decode(bytes);
      } catch (cause) {
        throw invalid("body is not valid UTF-8", cause);
      }
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw invalid("body is not valid JSON", cause);
  }
  return validateEvent(value);
}

function validateEvent(value: unknown): WebhookEvent {
  const event = object(value, "body");
  string(event, "id");
  const type = string(event, "type");
  string(event, "environment");
  if (!TIMESTAMP.test(string(event, "createdAt"))) {
    throw invalid("createdAt must be an ISO 8601 timestamp");
  }
  if (!("data" in event)) throw invalid("data is missing");

  if (!KNOWN_TYPES.has(type)) {
    // Forward compatibility: an authentic event of a newer type is delivered, not refused.
    event.originalType = type;
    event.type = "unknown";
    return event as unknown as UnknownWebhookEvent;
  }
  const data = object(event.data, "data");
  if (type === "flag.updated") validateFlagUpdated(data);
  return event as unknown as KnownWebhookEvent;
}

function validateFlagUpdated(data: Record<string, unknown>): void {
  string(data, "flag", "data.");
  const changes = data.changes;
  if (!Array.isArray(changes)) throw invalid("data.changes must be an array");
  changes.forEach((item, index) => {
    const name = `data.changes[${index}]`;
    string(object(item, name), "path", `${name}.`);
  });
  const actor = object(data.actor, "data.actor");
  string(actor, "type", "data.actor.");
  string(actor, "email", "data.actor.");
}

function object(value: unknown, name: string): Record<string, unknown> {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  throw invalid(`${name} must be an object`);
}

/** `owner[key]` if it is a string; `at` is the path to owner, for the message. */
function string(owner: Record<string, unknown>, key: string, at = ""): string {
  const value = owner[key];
  if (typeof value === "string") return value;
  throw invalid(`${at}${key} must be a string`);
}

function invalid(message: string, cause?: unknown): WebhookError {
  return new WebhookError("invalid_payload", message, { cause });
}

/**
 * Validates a value that is already parsed JSON (a queued job's data) with exactly the rules of
 * {@link parseEvent}, and returns it typed. For flag-webhooks/bullmq; not exported by the package.
 */
export function validateParsedEvent(value: unknown): WebhookEvent {
  return validateEvent(value);
}
