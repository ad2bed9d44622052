// What the two transactional inboxes (Postgres, SQLite) share around their own SQL: the options
// every inbox takes, and the refusals a delivery can get from one (a copy in flight, the
// database failing, a row the database did not store). One place, so both answer alike and name their options alike.
import { WebhookError } from "../errors.js";
import { checkScope } from "../store-contract/keys.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";

/** The options every inbox takes, checked. */
export interface InboxBasics {
  /** The endpoint's name, checked by the stores' scope rule. */
  scope: string;
  /** How long a handled id is kept, in ms (default 30 days). */
  retention: number;
  /** The bound on each of the inbox's own waits and steps, in ms (default 5 s, at most a timer's). */
  timeout: number;
}

/**
 * Checks an inbox's options when it is made (`owner` names the class in the TypeError): an
 * object with a `scope`, and the durations `retention` and `timeout`.
 */
export function inboxBasics(
  options: { scope: string; retention?: number | string; timeout?: number | string } | null | undefined,
  owner: string,
): InboxBasics {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`flag-webhooks: ${owner} needs options with a "scope"`);
  }
  return {
    scope: checkScope(options.scope, owner),
    retention: parseDuration(options.retention ?? "30d", "retention"),
    timeout: parseDuration(options.timeout ?? "5s", "timeout", TIMER_MAX),
  };
}

/** `409 delivery_in_progress`: another delivery is handling a copy of event `id`. */
export function inProgress(id: string): WebhookError {
  return new WebhookError("delivery_in_progress", `event ${id} is being handled by another delivery; retry later`);
}

/**
 * `503 store_unavailable` for a failure of the inbox on `database` ("Postgres", "SQLite"), the
 * failure as its cause; an error that already is a {@link WebhookError} stays as it is.
 */
export function unavailable(cause: unknown, database: string): WebhookError {
  if (cause instanceof WebhookError) return cause;
  return new WebhookError("store_unavailable", `the ${database} inbox is unavailable; retry later`, { cause });
}

/**
 * `503 store_unavailable` (with `Retry-After`) for an event the database on `database` neither
 * kept nor holds: its INSERT stored no row and met none (a trigger or rule dropped it).
 */
export function notKept(eventId: string, database: string): WebhookError {
  return new WebhookError(
    "store_unavailable",
    `the ${database} inbox kept nothing of event ${eventId}: its row was not stored (a trigger or rule may drop it); retry later`,
  );
}

/** The table an inbox uses when its options name none. */
export const DEFAULT_TABLE = "flag_webhooks_inbox";

/** A table name: an identifier, optionally in a schema or attached database (`schema.table`). */
const TABLE = /^(?:[A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** `table` as its parts, `[schema?, name]`; a TypeError when it is no table name (it is written into SQL). */
export function tableNameParts(table: unknown): string[] {
  if (typeof table !== "string" || !TABLE.test(table)) {
    throw new TypeError('flag-webhooks: option "table" must be a table name, optionally "schema.table"');
  }
  return table.split(".");
}

/** An inbox's table, quoted for SQL, and the statements that create what it needs. */
export interface InboxSchema {
  /** The table, quoted: `"flag_webhooks_inbox"` or `"schema"."table"`. */
  readonly table: string;
  /** The statements that create what is missing, in order; each safe to run again. */
  readonly statements: readonly string[];
}
