import type { Database as BunDatabase } from "bun:sqlite";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { DatabaseSync } from "node:sqlite";
import type { D1Database, D1PreparedStatement, DurableObjectStorage, SqlStorage } from "@cloudflare/workers-types";
import type { Client, Transaction } from "@libsql/client";
import type BetterSqlite3 from "better-sqlite3";
import { createRouter, type DedupeStore, type WebhookEvent } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import {
  type InboxStatements,
  type InboxTransaction,
  type SqliteConnection,
  SqliteInbox,
  type SqlStatement,
} from "flag-webhooks/sqlite";
import { describe, expectTypeOf, it } from "vitest";

declare const nodeDb: DatabaseSync;
declare const betterDb: BetterSqlite3.Database;
declare const bunDb: BunDatabase;
declare const libsql: Client;
declare const d1: D1Database;
declare const storage: DurableObjectStorage;
const secret = "s";

describe("flag-webhooks/sqlite types", () => {
  it("types tx as each driver's own type", () => {
    new SqliteInbox(nodeDb, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<DatabaseSync>();
    });
    new SqliteInbox(betterDb, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<BetterSqlite3.Database>();
    });
    new SqliteInbox(bunDb, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<BunDatabase>();
    });
    new SqliteInbox(libsql, { scope: "a" }).handle(async (_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<Transaction>();
    });
    expectTypeOf<InboxTransaction<Client>>().toEqualTypeOf<Transaction>();
    expectTypeOf<InboxTransaction<DatabaseSync>>().toEqualTypeOf<DatabaseSync>();
  });

  it("on D1 and Durable Objects the handler returns the statements to run with the id", () => {
    new SqliteInbox(d1, { scope: "a" }).handle((event, db) => {
      expectTypeOf(db).toEqualTypeOf<D1Database>();
      return [db.prepare("insert into audit (event_id) values (?)").bind(event.id)];
    });
    expectTypeOf<InboxStatements<D1Database>>().toEqualTypeOf<readonly D1PreparedStatement[]>();
    // Nothing to write is allowed; a reply is not (the handler answers by throwing).
    new SqliteInbox(d1, { scope: "a" }).handle(() => undefined);
    // @ts-expect-error a D1 handler returns statements, not a reply
    new SqliteInbox(d1, { scope: "a" }).handle(() => ({ status: 202 }));
    new SqliteInbox(storage, { scope: "a" }).handle(async (event, sql) => {
      expectTypeOf(sql).toEqualTypeOf<SqlStorage>();
      return [["insert into audit (event_id) values (?)", event.id]];
    });
    expectTypeOf<InboxStatements<DurableObjectStorage>>().toEqualTypeOf<readonly SqlStatement[]>();
  });

  it("is a DedupeStore, requires a scope, and refuses what is no database", () => {
    expectTypeOf(new SqliteInbox(nodeDb, { scope: "a" })).toExtend<DedupeStore>();
    // @ts-expect-error scope is required
    new SqliteInbox(nodeDb, {});
    // @ts-expect-error not a SQLite database
    new SqliteInbox({ query: () => [] }, { scope: "a" });
    const custom: SqliteConnection = { prepare: () => ({ all: () => [], run: () => ({}) }), exec: () => {} };
    new SqliteInbox(custom, { scope: "a" }).handle((_event, tx) => {
      expectTypeOf(tx).toEqualTypeOf<SqliteConnection>();
    });
  });

  it("fits every adapter's onEvent, with the adapter's context after tx, and takes a router", () => {
    const inbox = new SqliteInbox(betterDb, { scope: "a" });
    expressMiddleware({
      secret,
      onEvent: inbox.handle<[IncomingMessage, ServerResponse]>((_event, _tx, req, res) => {
        expectTypeOf(req.method).toEqualTypeOf<string | undefined>();
        res.statusCode = 200;
      }),
    });
    webhookHandler({ secret, onEvent: inbox.handle<[Request]>((_event, _tx, request) => void request.url) });
    const router = createRouter<[tx: BetterSqlite3.Database]>().on("flag.updated", (event, tx) => {
      tx.prepare("insert into audit (flag) values (?)").run(event.data.flag);
    });
    expectTypeOf(inbox.handle(router)).toExtend<(event: WebhookEvent, ...context: never[]) => Promise<unknown>>();
  });
});
