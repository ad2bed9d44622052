// One case run on both inboxes: a SQLite file (better-sqlite3, WAL) and Postgres (pg), each with an
// effects table its handler writes through tx, for the attacks on keep-then-work that must hold on
// either database.
import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import { PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll } from "vitest";
import type { EffectsDatabase } from "./postgres-effects.js";
import { databaseFile } from "./sqlite.js";

/** An inbox, the handler's write through its tx, and how many effects an event has. */
export interface InboxSubject {
  inbox: PostgresInbox<never> | SqliteInbox;
  /** The handler's write through tx. */
  effect(tx: unknown, id: string): Promise<unknown>;
  effects(id: string): Promise<number>;
}

/** What an inbox of a subject is made with: its scope's prefix (a unique suffix is added) and clock. */
export interface SubjectOptions {
  scope: string;
  timeout?: string;
  now?: () => number;
}

/**
 * The two subjects, each `make` giving an inbox on a database of its own kind (SQLite on a new
 * file, closed after the file's tests; Postgres on `database`, when `postgres` is available).
 */
export function inboxSubjects(
  database: EffectsDatabase,
  postgres: boolean,
): { name: string; available: boolean; make(options: SubjectOptions): InboxSubject }[] {
  const files: Database.Database[] = [];
  afterAll(() => {
    for (const db of files.splice(0)) db.close();
  });
  const inboxOptions = ({ scope, timeout, now }: SubjectOptions) => ({
    scope: `${scope}-${randomUUID().slice(0, 8)}`,
    ...(timeout && { timeout }),
    ...(now && { now }),
  });
  return [
    {
      name: "SQLite (better-sqlite3)",
      available: true,
      make(options) {
        const db = new Database(databaseFile());
        files.push(db);
        db.pragma("journal_mode = wal");
        db.exec("create table effects (event_id text not null)");
        return {
          inbox: new SqliteInbox(db, inboxOptions(options)),
          effect: async (tx, id) =>
            (tx as Database.Database).prepare("insert into effects (event_id) values (?)").run(id),
          effects: async (id) =>
            (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n,
        };
      },
    },
    {
      name: "Postgres (pg)",
      available: postgres,
      make(options) {
        return {
          inbox: new PostgresInbox(database.pool(4), inboxOptions(options)) as PostgresInbox<never>,
          effect: (tx, id) =>
            (tx as { query(sql: string, params: unknown[]): Promise<unknown> }).query(
              "insert into effects (event_id) values ($1)",
              [id],
            ),
          effects: (id) => database.effects(id),
        };
      },
    },
  ];
}
