import type { Client, Transaction } from "@libsql/client";
import type Database from "better-sqlite3";
import { createRouter } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { type AttemptInfo, type InboxTransaction, type KeptEvent, PostgresInbox } from "flag-webhooks/postgres";
import { SqliteInbox } from "flag-webhooks/sqlite";
import type pg from "pg";
import type postgres from "postgres";
import { describe, expectTypeOf, it } from "vitest";

declare const pool: pg.Pool;
declare const sql: postgres.Sql;
declare const db: Database.Database;
declare const libsql: Client;

describe("keep-then-work types", () => {
  it("gives the worker's handler each client's own transaction, and the attempt", () => {
    new PostgresInbox(pool, { scope: "a" }).work((_event, tx, attempt) => {
      expectTypeOf(tx).toEqualTypeOf<pg.PoolClient>();
      expectTypeOf(attempt).toEqualTypeOf<AttemptInfo>();
    });
    new PostgresInbox(sql, { scope: "a" }).work((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<InboxTransaction<typeof sql>>();
    });
    new SqliteInbox(db, { scope: "a" }).work((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<Database.Database>();
    });
    new SqliteInbox(libsql, { scope: "a" }).enqueue({
      run: (_event, tx) => {
        expectTypeOf(tx).toEqualTypeOf<Transaction>();
      },
    });
  });

  it("takes a router of (event, tx) as the worker's handler, and enqueue() as any adapter's onEvent", async () => {
    const inbox = new PostgresInbox(pool, { scope: "a" });
    const router = createRouter<[tx: pg.PoolClient]>().on("flag.updated", async (_event, tx) => {
      await tx.query("select 1");
    });
    inbox.work(router, { retries: ["10s", "1m"], jitter: 0.2, interval: false });
    webhookMiddleware({ secret: "s", onEvent: inbox.enqueue() });
    expectTypeOf(await inbox.parked()).toEqualTypeOf<KeptEvent[]>();
    expectTypeOf(inbox.replay).parameter(0).toEqualTypeOf<string | { since: Date | number }>();
    // @ts-expect-error a schedule is a list of delays
    inbox.work(router, { retries: "1m" });
  });
});
