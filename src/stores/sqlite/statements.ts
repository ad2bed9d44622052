// The inbox's SQL, for one table: every statement takes `?` parameters only (each driver binds
// them alike), and times are whole ms since the epoch, by the receiver's clock (a SQLite file has
// no server clock; D1 and Durable Objects run where the Worker runs).

import { inboxSchema } from "./schema.js";

/** Every statement the inbox runs on one table. */
export interface InboxStatements {
  /** Creates the table and its index if they are missing (the schema of schema.ts). */
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
  const { table: t, statements: create } = inboxSchema(table);
  const columns = "(scope, id, state, token, expires_at, handled_at)";
  return {
    create,
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
