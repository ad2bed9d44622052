import type { WebhookEvent } from "flag-webhooks";

// A mirror of flag state kept in a database table, written by a handler through its transaction
// (so it commits with the event's record, or not at all), as a receiver that mirrors flags keeps
// one. It applies events as the test kit's FlagMirror does, and reads back in FlagMirror's
// snapshot form, so the two compare directly. Statements use `$1` parameters; `sqlite` turns them
// into `?` (each is bound once, in order).

/** The mirror table, for Postgres and SQLite alike. */
export const MIRROR_TABLE = `create table if not exists order_mirror (
  scope text not null,
  flag text not null,
  environment text not null,
  path text not null,
  value text not null,
  primary key (scope, flag, environment, path)
)`;

/** A statement and its parameters. */
export type Statement = [sql: string, params: string[]];

/** The statements that apply `event` (as its handler sees it) to the mirror of `scope`. */
export function mirrorStatements(scope: string, event: WebhookEvent): Statement[] {
  const flag = (event.data as { flag?: unknown } | undefined)?.flag;
  if (typeof flag !== "string") return [];
  if (event.type === "flag.updated") {
    return event.data.changes.map((change) => [
      `insert into order_mirror (scope, flag, environment, path, value) values ($1, $2, $3, $4, $5)
       on conflict (scope, flag, environment, path) do update set value = excluded.value`,
      [scope, flag, event.environment, change.path, JSON.stringify(change.to)],
    ]);
  }
  if (event.type !== "flag.created" && event.type !== "flag.deleted") return [];
  // A late one resets every field of the flag but those changed after it (keptFields).
  const kept = (event.keptFields ?? []).filter((field) => field.path !== undefined);
  const keep = kept.map((_, i) => ` and (environment, path) <> ($${3 + 2 * i}, $${4 + 2 * i})`).join("");
  const params = kept.flatMap((field) => [field.environment, field.path as string]);
  return [[`delete from order_mirror where scope = $1 and flag = $2${keep}`, [scope, flag, ...params]]];
}

/** A `$1` statement as SQLite's drivers take it: plain `?`. */
export function sqlite(sql: string): string {
  return sql.replace(/\$\d+/g, "?");
}

/** The statement that reads the mirror of a scope ($1), as {@link snapshotOf} takes its rows. */
export const MIRROR_ROWS = "select flag, environment, path, value from order_mirror where scope = $1";

/** The mirror's rows in FlagMirror's snapshot form: values by the JSON of `[flag, environment, path]`, sorted. */
export function snapshotOf(rows: readonly Record<string, unknown>[]): Record<string, unknown> {
  const entries = rows.map((row): [string, unknown] => [
    JSON.stringify([row.flag, row.environment, row.path]),
    JSON.parse(String(row.value)),
  ]);
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** How many fields of `actual` differ from `expected`: missing, extra, or of another value. */
export function wrongFields(actual: Record<string, unknown>, expected: Record<string, unknown>): number {
  const keys = new Set([...Object.keys(actual), ...Object.keys(expected)]);
  let wrong = 0;
  for (const key of keys) {
    if (!(key in actual) || !(key in expected) || JSON.stringify(actual[key]) !== JSON.stringify(expected[key])) {
      wrong++;
    }
  }
  return wrong;
}
