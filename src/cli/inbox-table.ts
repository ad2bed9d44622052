// What `flag-webhooks inbox` prints of kept events: a table of several (id, state, type, flag,
// attempts, last error, next attempt), or every field of one with its body, for a person at a
// terminal; `--json` prints the events as they are instead.
import type { KeptEvent } from "../stores/work/types.js";
import { printable, printableId } from "./terminal-text.js";

const COLUMNS = ["ID", "STATE", "TYPE", "FLAG", "ATTEMPTS", "LAST ERROR", "NEXT ATTEMPT"] as const;
/**
 * The widest a cell of these columns gets; the rest is cut with an ellipsis. Never the id: what the
 * table lists is what show, replay and purge are given (a hashed id is 65 characters).
 */
const WIDEST: Record<(typeof COLUMNS)[number], number> = {
  ID: Number.POSITIVE_INFINITY,
  STATE: 7,
  TYPE: 24,
  FLAG: 24,
  ATTEMPTS: 8,
  "LAST ERROR": 48,
  "NEXT ATTEMPT": 20,
};

/** The events as an aligned table, one line each, with times relative to `now`. */
export function eventTable(events: readonly KeptEvent[], now: number): string {
  // The id is not made one line (that would turn a tab or two spaces into one space, another id):
  // its controls are escaped, as readBack() reads them.
  const rows = events.map((event) => [
    printableId(event.id),
    ...[
      event.state,
      typeOf(event) ?? "-",
      flagOf(event) ?? "-",
      String(event.attempts),
      event.lastError ?? "-",
      nextAttempt(event, now),
    ].map((cell) => printable(oneLine(cell))),
  ]);
  const widths = COLUMNS.map((title, i) =>
    Math.min(WIDEST[title], Math.max(title.length, ...rows.map((row) => (row[i] as string).length))),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => cut(cell, widths[i] as number).padEnd(widths[i] as number))
      .join("  ")
      .trimEnd();
  return `${[line(COLUMNS), ...rows.map(line)].join("\n")}\n`;
}

/** Every field of one event, then its body (indented JSON when it parses). */
export function eventDetails(event: KeptEvent, now: number): string {
  const time = (ms: number | null) => (ms === null ? "-" : new Date(ms).toISOString());
  const fields: [string, string][] = [
    ["id", event.id],
    ["state", event.state],
    ["type", typeOf(event) ?? "-"],
    ["flag", flagOf(event) ?? "-"],
    ["created at", event.createdAt ?? "-"],
    ["received at", time(event.receivedAt)],
    ["attempts", String(event.attempts)],
    ["next attempt", event.nextAttemptAt === null ? "-" : `${time(event.nextAttemptAt)} (${nextAttempt(event, now)})`],
    ["last error", event.lastError ?? "-"],
  ];
  const width = Math.max(...fields.map(([name]) => name.length));
  // Only the last error keeps its lines (a stack, an API's answer); a newline in another field
  // would print a line that looks like a field of its own.
  const lines = fields.map(
    ([name, value]) =>
      `${`${name}:`.padEnd(width + 2)}${name === "id" ? printableId(value) : printable(value, name === "last error")}`,
  );
  return `${lines.join("\n")}\n\n${printable(bodyText(event), true)}\n`;
}

/**
 * The event's type as the sender signed it, read from the body kept: the column is the type as
 * the database stored it, which for a type no UTF-8 can hold (a lone surrogate) is U+FFFD instead.
 */
function typeOf(event: KeptEvent): string | null {
  const type = parsed(event.body)?.type;
  return typeof type === "string" ? type : event.type;
}

/** The flag an event is about: `data.flag` (flag.updated), or `data.key`/`data.flag.key` when the service sends them. */
function flagOf(event: KeptEvent): string | undefined {
  const data = parsed(event.body)?.data as Record<string, unknown> | undefined;
  if (typeof data !== "object" || data === null) return undefined;
  const flag = data.flag;
  if (typeof flag === "string") return flag;
  if (typeof flag === "object" && flag !== null && typeof (flag as { key?: unknown }).key === "string") {
    return (flag as { key: string }).key;
  }
  return typeof data.key === "string" ? data.key : undefined;
}

/** When the next attempt is, for a person: "in 4m 10s", "due now", "running", or "-" (parked, done). */
function nextAttempt(event: KeptEvent, now: number): string {
  if (event.state === "running") return "running";
  if (event.nextAttemptAt === null) return "-";
  const wait = event.nextAttemptAt - now;
  return wait <= 0 ? "due now" : `in ${duration(wait)}`;
}

/** A wait as its two largest units: "2h 5m", "4m 10s", "12s". */
function duration(ms: number): string {
  const units: [string, number][] = [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ];
  const parts: string[] = [];
  let rest = Math.ceil(ms / 1000) * 1000;
  for (const [unit, size] of units) {
    if (parts.length === 2) break;
    const count = Math.floor(rest / size);
    if (count > 0 || parts.length > 0) {
      if (count > 0) parts.push(`${count}${unit}`);
      rest -= count * size;
    }
  }
  return parts.join(" ") || "1s";
}

function bodyText({ body, receivedAt }: KeptEvent): string {
  // A kept event has its received time; purged within its retention, its id stays done without a body.
  if (body === null) {
    return receivedAt === null
      ? "(no body kept: a row handle() wrote)"
      : "(body purged: its id kept as done until prune())";
  }
  const value = parsed(body);
  // Indented only when that shows the same JSON: parsing loses a number past 2^53 and a key sent
  // twice, and the body is shown to say what the sender signed.
  return value !== undefined && JSON.stringify(value) === body ? JSON.stringify(value, null, 2) : body;
}

function parsed(body: string | null): Record<string, unknown> | undefined {
  if (body === null) return undefined;
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

function cut(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, width - 1).trimEnd()}…`;
}
