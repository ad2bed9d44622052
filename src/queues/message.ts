// One serialisation of an event for every queue hand-off (BullMQ, Cloudflare Queues): what a
// producer sends, and how a consumer reads it back into the event the receiver verified, with the
// same checks on every queue.
import { backend } from "../crypto/index.js";
import { WebhookError } from "../errors.js";
import { validateParsedEvent, type WebhookEvent } from "../events.js";
import { matchingSecret, type Secret } from "../signature.js";

/**
 * The field of a signed message that holds its signature, beside the event's own fields: a
 * signed message is still the event plus one field, so `job.data` stays the event and a consumer
 * that does not verify reads it as any other. The name is reserved: the reader removes it.
 */
export const SIGNATURE_FIELD = "flag-webhooks.signature";

/**
 * The message body a hand-off sends for an event: the event itself, as JSON data (an unknown
 * type as `type: "unknown"` with the service's type in `originalType`). With `key`, it also holds
 * the lowercase hex HMAC-SHA256 of the event's JSON text under that key, in {@link SIGNATURE_FIELD}.
 * Both queues carry the body as JSON, and a JSON round trip gives the same text again, so the
 * consumer can recompute what was signed from what it receives.
 */
export async function writeMessage(event: WebhookEvent, key: string | undefined): Promise<WebhookEvent> {
  if (key === undefined) return event;
  const { [SIGNATURE_FIELD]: _reserved, ...plain } = event as unknown as Record<string, unknown>;
  // The core's HMAC, as `sign` computes it; the key was checked when the option was read.
  const signature = await backend.sign(key, JSON.stringify(plain));
  return { ...plain, [SIGNATURE_FIELD]: signature } as unknown as WebhookEvent;
}

/**
 * The event a message holds, validated with the receiver's rules (`parseEvent`), an unknown type
 * kept with its `originalType`. `value` is the message as JSON data ({@link writeMessage} made it;
 * a queue that carries text or bytes parses them first). With `keys`, the message must carry a
 * signature made with one of them (compared in constant time, before the event is checked):
 * otherwise it is refused with `WebhookError("invalid_signature")`. Anything that is no event is
 * `WebhookError("invalid_payload")` naming the field at fault. The event returned is parsed from
 * exactly the text that was verified.
 */
export async function readMessage(value: unknown, keys: Secret | undefined): Promise<WebhookEvent> {
  let rest = value;
  let signature: unknown;
  if (typeof value === "object" && value !== null && Object.hasOwn(value, SIGNATURE_FIELD)) {
    ({ [SIGNATURE_FIELD]: signature, ...rest } = value as Record<string, unknown>);
  }
  const text = jsonText(rest);
  // The check of verifySignature (the keys were checked when the option was read): a signature
  // that is no string, or not 64 lowercase hex characters, matches no key.
  if (keys !== undefined && (await matchingSecret(keys, text, signature)) < 0) {
    throw new WebhookError(
      "invalid_signature",
      signature === undefined
        ? "the message is not signed, and verifyWith requires a signature"
        : "the message's signature matches no key of verifyWith",
    );
  }
  return eventOf(JSON.parse(text));
}

/** The JSON text of a message's value: what was signed, and what the event is read from. */
function jsonText(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
    if (text === undefined) throw new TypeError("the message has no body");
  } catch (cause) {
    throw new WebhookError("invalid_payload", "the message does not hold an event", { cause });
  }
  return text;
}

/**
 * The event in parsed JSON, checked as the service sent it: an event the receiver turned into
 * `"unknown"` is checked under its `originalType`, so it comes out the same again.
 */
function eventOf(data: unknown): WebhookEvent {
  let value = data as Record<string, unknown> | null;
  const unknownType = value?.type === "unknown";
  if (unknownType) {
    if (typeof value?.originalType !== "string") {
      throw new WebhookError("invalid_payload", "originalType must be a string");
    }
    value = { ...value, type: value.originalType };
  }
  const event = validateParsedEvent(value);
  if (unknownType && event.type !== "unknown") {
    throw new WebhookError("invalid_payload", `type is "unknown" but originalType is the known type "${event.type}"`);
  }
  return event;
}

/**
 * Checks a `verifyWith` option: a key, or a non-empty list of them while rotating (a message
 * signed with any one passes). A `TypeError` naming the option, never holding a key, otherwise.
 */
export function checkKeys(keys: unknown, where: string): Secret | undefined {
  if (keys === undefined) return undefined;
  const list = Array.isArray(keys) ? keys : [keys];
  if (list.length > 0 && list.every((key) => typeof key === "string" && key !== "")) return keys as Secret;
  throw new TypeError(
    `flag-webhooks: option "verifyWith" of ${where} must be a non-empty string, or a non-empty list of them`,
  );
}

/** Checks a `signWith` option: one non-empty key. A `TypeError` naming the option otherwise. */
export function checkKey(key: unknown, where: string): string | undefined {
  if (key === undefined || (typeof key === "string" && key !== "")) return key;
  throw new TypeError(`flag-webhooks: option "signWith" of ${where} must be a non-empty string`);
}
