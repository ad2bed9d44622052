import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { createRouter, type DedupeStore, type FlagUpdatedEvent, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware as koaMiddleware } from "flag-webhooks/koa";
import { webhookHandler as lambdaHandler } from "flag-webhooks/lambda";
import { type InboxClient, type InboxTransaction, PostgresInbox } from "flag-webhooks/postgres";
import { Kysely, PostgresDialect, type Transaction } from "kysely";
import type pg from "pg";
import type postgres from "postgres";
import { describe, expectTypeOf, it } from "vitest";

declare const pool: pg.Pool;
declare const client: pg.Client;
declare const sql: postgres.Sql;
const secret = "s";

describe("flag-webhooks/postgres types", () => {
  it("types tx as each client's own transaction", () => {
    new PostgresInbox(pool, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<pg.PoolClient>();
    });
    new PostgresInbox(client, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<pg.Client>();
    });
    new PostgresInbox(sql, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<postgres.TransactionSql>();
    });
    const kysely = new Kysely<{ audit: { id: string } }>({ dialect: new PostgresDialect({ pool }) });
    const custom: InboxClient<Transaction<{ audit: { id: string } }>> = {
      transaction: (fn) => kysely.transaction().execute(fn),
      query: async () => [],
    };
    new PostgresInbox(custom, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<Transaction<{ audit: { id: string } }>>();
    });
    expectTypeOf<InboxTransaction<pg.Pool>>().toEqualTypeOf<pg.PoolClient>();
  });

  it("is a DedupeStore, and requires a scope", () => {
    expectTypeOf(new PostgresInbox(pool, { scope: "a" })).toExtend<DedupeStore>();
    // @ts-expect-error scope is required
    new PostgresInbox(pool, {});
    // @ts-expect-error so are the options
    new PostgresInbox(pool);
    // @ts-expect-error not a Postgres client
    new PostgresInbox({ get: () => 1 }, { scope: "a" });
  });

  it("handle(fn) is an onEvent for every adapter, and fn gets the adapter's context after tx", () => {
    const inbox = new PostgresInbox(pool, { scope: "a" });
    expressMiddleware({ secret, onEvent: inbox.handle(async (_event, tx) => void (await tx.query("select 1"))) });
    koaMiddleware({ secret, onEvent: inbox.handle(() => {}) });
    webhookHandler({ secret, onEvent: inbox.handle(() => new Response(null, { status: 202 })) });
    lambdaHandler({
      secret,
      onEvent: inbox.handle<[APIGatewayProxyEventV2 | object, unknown]>((_event, _tx, lambdaEvent) => {
        expectTypeOf(lambdaEvent).toEqualTypeOf<APIGatewayProxyEventV2 | object>();
      }),
    });
  });

  it("takes a createRouter() router whose handlers take (event, tx)", () => {
    const inbox = new PostgresInbox(pool, { scope: "a" });
    const router = createRouter<[tx: pg.PoolClient]>().on("flag.updated", async (event, tx) => {
      expectTypeOf(event).toEqualTypeOf<FlagUpdatedEvent>();
      expectTypeOf(tx).toEqualTypeOf<pg.PoolClient>();
    });
    expressMiddleware({ secret, onEvent: inbox.handle(router) });
    expectTypeOf(inbox.handle(router)).toExtend<(event: WebhookEvent, ...context: unknown[]) => Promise<unknown>>();
    // A router over another client's transaction does not fit.
    const other = createRouter<[tx: postgres.TransactionSql]>();
    // @ts-expect-error tx is a pg.PoolClient here
    inbox.handle(other);
  });
});
