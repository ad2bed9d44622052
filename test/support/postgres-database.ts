import { randomUUID } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";
import { startPostgres, stopPostgres } from "./postgres-server.js";

/** A database for one test file's run: its URL, and how to give it back. */
export interface TestDatabase {
  /** A connection string for the `postgres` superuser, to this run's own database. */
  url: string;
  close(): Promise<void>;
}

/**
 * The Postgres a test file runs against. In the Stryker run a globalSetup started one server for
 * the whole run (test/support/postgres-global-setup.ts): each call makes a new, empty database on
 * it, dropped by `close()`, so a run of the file (one per mutant) never sees another run's rows.
 * Otherwise (`npm test`) a server of its own is started (test/support/postgres-server.ts) and
 * stopped by `close()`.
 */
export async function testDatabase(): Promise<TestDatabase> {
  const shared = inject("postgresUrl");
  if (shared === undefined) {
    const server = await startPostgres();
    return { url: server.url, close: () => stopPostgres(server) };
  }
  const name = `run_${randomUUID().replaceAll("-", "")}`;
  const admin = new pg.Client({ connectionString: shared });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(shared);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async close() {
      const client = new pg.Client({ connectionString: shared });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}
