// The Postgres inbox's schema, in one place: migrate() runs these statements, and
// `flag-webhooks schema postgres` prints them for a migration tool, so the two cannot drift.
// A change of schema is one more statement at the end of the list (`alter table … add column if
// not exists …`), so that databases made by any earlier version are brought up to date too.

import { DEFAULT_TABLE, type InboxSchema, tableNameParts } from "../inbox-shell.js";
import { keepSchema } from "./keep.js";

export { DEFAULT_TABLE, type InboxSchema };

/** Postgres cuts identifiers at 63 bytes (NAMEDATALEN − 1). */
const IDENTIFIER_MAX = 63;

/** The schema of the inbox in `table`; a TypeError when it is no table name. */
export function inboxSchema(table: string = DEFAULT_TABLE): InboxSchema {
  const parts = tableNameParts(table);
  const t = parts.map((part) => `"${part}"`).join(".");
  const name = parts[parts.length - 1] as string;
  const index = `"${indexName(name)}"`;
  return {
    table: t,
    statements: [
      `create table if not exists ${t} (
  scope text not null,
  id text not null,
  state text not null check (state in ('claimed', 'done')),
  token text,
  expires_at timestamptz not null,
  handled_at timestamptz not null default now(),
  primary key (scope, id)
)`,
      `create index if not exists ${index} on ${t} (scope, expires_at)`,
      // What keep-then-work adds: its columns, the wider state check, the index of due events.
      ...keepSchema(t, `"${indexName(name, "due")}"`, `"${indexName(name, "parked")}"`),
    ],
  };
}

/**
 * The index's name: `<table>_expires`, or, where that is longer than Postgres keeps, the table's
 * name cut short with a hash of the whole name, so that two long tables never share one index
 * name and none is cut to the table's own name (`create index if not exists` would then create
 * nothing).
 */
function indexName(table: string, suffix = "expires"): string {
  const name = `${table}_${suffix}`;
  if (name.length <= IDENTIFIER_MAX) return name;
  // FNV-1a over the name: stable across processes and versions, 8 hex digits.
  let hash = 0x811c9dc5;
  for (const char of table) hash = Math.imul(hash ^ (char.codePointAt(0) as number), 0x01000193) >>> 0;
  const end = `_${hash.toString(16).padStart(8, "0")}_${suffix}`;
  return `${table.slice(0, IDENTIFIER_MAX - end.length)}${end}`;
}

/**
 * Throws unless the database's `encoding` holds any text a sender may send: UTF8, or SQL_ASCII
 * (which stores the bytes as they come). In another (LATIN1…), `enqueue()` could not keep a body
 * with a character the encoding lacks, and would answer 503 to every retry of it until the sender
 * gave up: refused at migrate(), before any event is answered.
 */
export function refuseEncoding(encoding: unknown): void {
  if (encoding === "UTF8" || encoding === "SQL_ASCII") return;
  throw new Error(
    `flag-webhooks: the Postgres inbox needs a database in UTF8, and this one is in ${String(encoding)}: an event whose body holds a character ${String(encoding)} lacks could not be kept. Create the database with ENCODING 'UTF8' (docs/postgres.md)`,
  );
}
