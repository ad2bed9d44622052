import pg from "pg";

// Round trips to Postgres, counted on real clients: pg sends one statement (one query string) per
// round trip, and postgres.js reports each message it sends through its `debug` hook.

let statements = 0;

/** A pg Client that counts its statements, for a Pool's `Client` option. */
export class CountingClient extends pg.Client {
  override query(...args: unknown[]): never {
    statements++;
    return (super.query as (...a: unknown[]) => never)(...args);
  }
}

/** How many statements the CountingClients sent while `run` ran. */
export async function countStatements(run: () => Promise<unknown>): Promise<number> {
  const before = statements;
  await run();
  return statements - before;
}
