// The inbox's SQL, for one table: every statement takes `?` parameters only (each driver binds
// them alike), and times are whole ms since the epoch, by the receiver's clock (a SQLite file has
// no server clock; D1 and Durable Objects run where the Worker runs).

/** A table name: an identifier, optionally in an attached database (`schema.table`). */
const TABLE = /^(?:[A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Every statement the inbox runs on one table. */
export interface InboxStatements {
  /** Creates the table and its index if they are missing. */
  readonly create: readonly string[];
  /** handle(): claims an id as done unless it is there unexpired; returns a row when it did. (scope, id, expires, now, now) */
  readonly claimDone: string;
  /** The state of an unexpired id. (scope, id, now) */
  readonly state: string;
  /** D1 and Durable Objects: deletes an expired row of an id, before the insert that must fail if it is there. (scope, id, now) */
  readonly dropExpired: string;
  /** D1 and Durable Objects: inserts an id as done; fails on the primary key if it is there. (scope, id, expires, now) */
  readonly insertDone: string;
  /** DedupeStore: claims an id for a lease; returns a row when it did. (scope, id, token, expires, now, now) */
  readonly claimLease: string;
  /** DedupeStore: marks an id done. (scope, id, expires, now) */
  readonly complete: string;
  /** DedupeStore: deletes this instance's claim. (scope, id, token) */
  readonly release: string;
  /** Deletes up to `limit` expired rows of a scope; returns a row for each. (scope, now) */
  readonly prune: (limit: number) => string;
}

/** The statements for `table`; a TypeError when it is no table name. */
export function statementsFor(table: string): InboxStatements {
  if (typeof table !== "string" || !TABLE.test(table)) {
    throw new TypeError('flag-webhooks: option "table" must be a table name, optionally "schema.table"');
  }
  const parts = table.split(".");
  const name = parts.pop() as string;
  const schema = parts.length ? `"${parts[0]}".` : "";
  const t = `${schema}"${name}"`;
  // SQLite names an index in the table's schema, and the table beside it without one.
  const index = `${schema}"${name}_expires"`;
  const columns = "(scope, id, state, token, expires_at, handled_at)";
  return {
    create: [
      `create table if not exists ${t} (
        scope text not null,
        id text not null,
        state text not null check (state in ('claimed', 'done')),
        token text,
        expires_at integer not null,
        handled_at integer not null,
        primary key (scope, id)
      ) without rowid`,
      `create index if not exists ${index} on "${name}" (scope, expires_at)`,
    ],
    claimDone: `insert into ${t} ${columns} values (?, ?, 'done', null, ?, ?)
      on conflict (scope, id) do update set state = 'done', token = null, expires_at = excluded.expires_at,
        handled_at = excluded.handled_at
      where ${t}.expires_at <= ?
      returning 1 as claimed`,
    state: `select state from ${t} where scope = ? and id = ? and expires_at > ?`,
    dropExpired: `delete from ${t} where scope = ? and id = ? and expires_at <= ?`,
    insertDone: `insert into ${t} ${columns} values (?, ?, 'done', null, ?, ?)`,
    claimLease: `insert into ${t} ${columns} values (?, ?, 'claimed', ?, ?, ?)
      on conflict (scope, id) do update set state = 'claimed', token = excluded.token,
        expires_at = excluded.expires_at, handled_at = excluded.handled_at
      where ${t}.expires_at <= ?
      returning 1 as claimed`,
    complete: `insert into ${t} ${columns} values (?, ?, 'done', null, ?, ?)
      on conflict (scope, id) do update set state = 'done', token = null, expires_at = excluded.expires_at`,
    release: `delete from ${t} where scope = ? and id = ? and state = 'claimed' and token = ?`,
    prune: (limit) =>
      `delete from ${t} where (scope, id) in (
        select scope, id from ${t} where scope = ? and expires_at < ? limit ${limit}
      ) returning 1 as gone`,
  };
}
