// Where an event stands in the one total order every receiver agrees on: its createdAt as an
// instant, then its id. Kept as one string so every store compares positions the same way.
import { WebhookError } from "../../errors.js";

/**
 * An event's place in the order of last-writer-wins: its `createdAt` as an instant, ties broken
 * by its `id`. The text is the canonical instant (`2026-11-21T09:30:00.5`, the fraction without
 * trailing zeros), a space, then the id; the receiver compares two by Unicode code point.
 */
export type Position = string;

// The form parseEvent accepts (spec section 2: an ISO 8601 UTC timestamp); parseEvent has
// checked the calendar fields too, so only the shape is read here.
const INSTANT = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(?:Z|\+00:00)$/;

/**
 * The position of an event. `createdAt` is read as an instant: `Z` and `+00:00` are the same
 * zero offset, and a fraction's trailing zeros change nothing (`.5` = `.500`). A `createdAt`
 * that names no instant has no place in the order, and is refused (`400 invalid_payload`), as
 * `parseEvent` refuses it: such an event never reaches the rule through a receiver.
 */
export function positionOf(event: { createdAt: unknown; id: unknown }): Position {
  const match = typeof event.createdAt === "string" ? INSTANT.exec(event.createdAt) : null;
  if (!match || typeof event.id !== "string") {
    throw new WebhookError("invalid_payload", "createdAt must be an ISO 8601 UTC timestamp to order the event");
  }
  const fraction = (match[2] ?? "").replace(/0+$/, "");
  // The date-time part has a fixed width, so text order is time order; a shorter fraction is an
  // earlier instant exactly when it is a prefix, and the space that follows sorts before "." and
  // every digit, so the whole string sorts as (instant, id).
  return `${match[1]}${fraction ? `.${fraction}` : ""} ${event.id}`;
}

/**
 * Compares two positions: negative when `a` comes first, 0 when equal, positive after. The text
 * is compared by Unicode code point (the order of UTF-8 bytes, as Redis, Postgres `COLLATE "C"`
 * and SQLite's default compare), not by UTF-16 unit as JavaScript's `<` does: the two differ for
 * characters from U+E000 on against those past U+FFFF.
 */
export function comparePositions(a: Position, b: Position): number {
  if (a === b) return 0;
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/** A UTF-16 unit's rank in code point order: surrogates (halves of U+10000 and up) sort last. */
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}

/** The later of two positions, either possibly absent. */
export function later(a: Position | undefined, b: Position | undefined): Position | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return comparePositions(a, b) >= 0 ? a : b;
}

/**
 * The instant `ms` (since the epoch) as a position that comes before every event of that instant
 * or later, and after every earlier one: the canonical instant without an id.
 */
export function positionAt(ms: number): Position {
  const [instant, fraction = ""] = new Date(ms).toISOString().slice(0, -1).split(".");
  const digits = fraction.replace(/0+$/, "");
  return digits ? `${instant}.${digits}` : (instant as string);
}

/** The instant of `position` (ms since the epoch): the inverse of {@link positionAt}; NaN for no position. */
export function instantOf(position: Position | undefined): number {
  if (position === undefined) return Number.NaN;
  const space = position.indexOf(" ");
  return Date.parse(`${space < 0 ? position : position.slice(0, space)}Z`);
}
