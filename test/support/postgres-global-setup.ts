import type { TestProject } from "vitest/node";
import { type PostgresServer, startPostgres, stopPostgres } from "./postgres-server.js";

// vitest globalSetup of the Stryker run (vitest.stryker.config.ts): ONE PostgreSQL for the whole
// run, handed to the tests as `inject("postgresUrl")`. Stryker's vitest runner re-runs a test
// file's beforeAll for every mutant, and a server of its own per mutant (initdb and start, 5-9 s)
// would make test/stores/postgres/inbox.test.ts take an hour. Each run of a test file still gets a new,
// empty database of its own (test/support/postgres-server.ts: testDatabase), dropped after it, so
// no mutant's rows are left for the next mutant's run. The normal suite has no globalSetup: each
// Postgres test file starts its own server, as before. Where PostgreSQL is not installed nothing
// is provided, and the tests skip (or fail under CI=true) as they do without it.

declare module "vitest" {
  export interface ProvidedContext {
    /** The superuser's URL of the run's shared PostgreSQL, when a globalSetup started one. */
    postgresUrl?: string;
  }
}

let server: PostgresServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  try {
    server = await startPostgres();
  } catch (error) {
    console.warn(`*** no shared PostgreSQL for this run (${(error as Error).message}) ***`);
    return;
  }
  project.provide("postgresUrl", server.url);
}

export async function teardown(): Promise<void> {
  await stopPostgres(server);
  server = undefined;
}
