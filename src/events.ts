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

/** One ordered field of a flag: a change's `(environment, path)`, or a rollout's `(environment)`. */
export interface FlagField {
  environment: string;
  /** The change's path; absent for the rollout of the environment (`rollout.step`, `rollout.guard_triggered`). */
  path?: string;
}

/** State, rules or variations of a flag changed. */
export type FlagUpdatedEvent = Envelope<"flag.updated", { flag: string; changes: FlagChange[]; actor: Actor }> & {
  /**
   * With the `order` option: the changes older than one already applied to their field, taken
   * out of `data.changes` (which then holds only the newer ones). Absent without `order`.
   */
  staleChanges?: FlagChange[];
};

/** What the `order` option adds to a whole-flag event that arrived after a newer change of its flag. */
interface LateReset {
  /**
   * With the `order` option, on a `flag.created` or `flag.deleted` that arrived after a newer
   * change of the flag was applied: the fields it resets that the order store still remembers
   * (changed within its retention); the newer ones stay. Absent when it resets the whole flag.
   */
  resetFields?: FlagField[];
  /**
   * With `resetFields`: the fields changed after this event, which keep their values; it resets
   * every other field of the flag, including any last changed before the retention (which
   * `resetFields` cannot name). Reset all but these to mirror the flag exactly.
   */
  keptFields?: FlagField[];
}

/** A flag was created. Its data is not documented by the service. */
export type FlagCreatedEvent = Envelope<"flag.created", UndocumentedData> & LateReset;
/** A flag was deleted. Its data is not documented by the service. */
export type FlagDeletedEvent = Envelope<"flag.deleted", UndocumentedData> & LateReset;
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

// createdAt is an "ISO 8601 UTC timestamp" (spec section 2): the extended date-time form with
// seconds, an optional fraction, and a UTC designator: `Z`, or `+00:00`, which is the same zero
// offset. Another offset is not UTC, and names an instant the spec does not promise.
// The pattern has no captures, and the fields are read from the character codes: exec() with six
// captures cost more than the rest of the event's validation together (every delivery takes it).
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|\+00:00)$/;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isUtcInstant(text: string): boolean {
  if (!TIMESTAMP.test(text)) return false;
  // The two digits at `at` as a number (the pattern put ASCII digits there).
  const field = (at: number) => (text.charCodeAt(at) - 48) * 10 + text.charCodeAt(at + 1) - 48;
  const year = field(0) * 100 + field(2);
  const month = field(5);
  const day = field(8);
  if (month < 1 || month > 12 || day < 1 || field(11) > 23 || field(14) > 59 || field(17) > 59) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : (DAYS_IN_MONTH[month - 1] as number));
}

// In a Unicode regular expression a surrogate pair is one code point, so this matches lone
// surrogates only: the strings that are not well-formed Unicode. (String.prototype.isWellFormed
// answers the same on Node 20+, Bun, Deno and workerd; the pattern needs no ES2024 lib.)
const LONE_SURROGATE = /\p{Cs}/u;

// Node 20's TextDecoder is several times slower with fatal: true (measured: 10-20 µs on a 2 KiB
// body), so bytes are decoded leniently and only re-checked strictly when the lenient result
// holds U+FFFD, which an authentic body hardly ever does.
const lenient = new TextDecoder();
const strict = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses and validates the body of a delivery whose signature was already verified, and returns
 * the typed event. Extra fields are kept; one leading byte order mark (U+FEFF) is ignored. Throws {@link WebhookError} `invalid_payload` (400)
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
  return validateEvent(parseJsonBody(payload));
}

/**
 * The JSON value of a body, decoded and parsed as {@link parseEvent} does (the same errors), not
 * yet checked to be an event. For the queue hand-offs; not exported by the package.
 */
export function parseJsonBody(payload: Payload): unknown {
  assertPayload(payload);
  let text: string;
  if (typeof payload === "string") {
    // A leading byte order mark is ignored here as TextDecoder ignores it in bytes below, so a
    // body gets one answer whether it arrives as a string or as bytes. RFC 8259
    // section 8.1: a sender must not add one, a parser may ignore it; the signature covers it.
    text = payload.charCodeAt(0) === 0xfeff ? payload.slice(1) : payload;
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
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw invalid("body is not valid JSON", cause);
  }
}

function validateEvent(value: unknown): WebhookEvent {
  const event = object(value, "body");
  key(event, "id");
  const type = key(event, "type");
  key(event, "environment");
  if (!isUtcInstant(string(event, "createdAt"))) {
    throw invalid("createdAt must be an ISO 8601 UTC timestamp, such as 2026-11-21T09:30:00Z");
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
  key(data, "flag", "data.");
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

/**
 * `owner[key]` if it is a string of well-formed Unicode. These fields become keys: dedupe-store
 * and BullMQ job ids, Redis keys, an app's cache keys. A lone surrogate has no UTF-8 form, so on
 * its way to Redis it turns into U+FFFD and `evt_\uD800` and `evt_\uDBFF` collide.
 */
function key(owner: Record<string, unknown>, name: string, at = ""): string {
  const value = string(owner, name, at);
  if (LONE_SURROGATE.test(value)) throw invalid(`${at}${name} must be well-formed Unicode (it holds a lone surrogate)`);
  return value;
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
