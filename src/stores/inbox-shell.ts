// What the two transactional inboxes (Postgres, SQLite) share around their own SQL: the options
// every inbox takes, and the two refusals a delivery can get from one (a copy in flight, the
// database failing). One place, so both answer alike and name their options alike.
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
