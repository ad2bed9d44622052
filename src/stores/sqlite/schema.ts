// The SQLite inbox's schema, in one place: migrate() runs these statements, and
// `flag-webhooks schema sqlite` prints them for a migration file (`wrangler d1 migrations`), so
// the two cannot drift. A change of schema is one more statement at the end of the list, so that
// databases made by any earlier version are brought up to date too (where SQLite cannot alter a
// table in place, migrate() rebuilds it with tableDefinition, so old tables end in this shape).
import { DEFAULT_TABLE, type InboxSchema, tableNameParts } from "../inbox-shell.js";
import { KEEP_COLUMNS } from "../work/statements.js";
import { IN_WORK, parkedIndex, STATES, stateList } from "../work/states.js";

export { DEFAULT_TABLE, type InboxSchema };

/** The schema of the inbox in `table`; a TypeError when it is no table name. */
export function inboxSchema(table: string = DEFAULT_TABLE): InboxSchema {
  const parts = tableNameParts(table);
  const name = parts.pop() as string;
  const schema = parts.length ? `"${parts[0]}".` : "";
  const t = `${schema}"${name}"`;
  // SQLite names an index in the table's schema, and the table beside it without one.
  const index = `${schema}"${name}_expires"`;
  return {
    table: t,
    statements: [
      tableDefinition(t, "if not exists "),
      `create index if not exists ${index} on "${name}" (scope, expires_at)`,
      // The index keep-then-work's worker finds due events by.
      `create index if not exists ${schema}"${name}_due" on "${name}" (scope, next_at) where ${IN_WORK}`,
      parkedIndex(`"${name}"`, `${schema}"${name}_parked"`),
    ],
  };
}

/**
 * The inbox table's definition as `create table <quoted>`: handle()'s columns, keep-then-work's,
 * and the check on every state. `ifNotExists` is `"if not exists "` or `""` (a rebuild).
 */
export function tableDefinition(quoted: string, ifNotExists: string): string {
  return `create table ${ifNotExists}${quoted} (
  scope text not null,
  id text not null,
  state text not null check (state in ${stateList(STATES)}),
  token text,
  expires_at integer not null,
  handled_at integer not null,
  ${KEEP_COLUMNS.map(([column, , type]) => `${column} ${type}`).join(",\n  ")},
  primary key (scope, id)
) without rowid`;
}
