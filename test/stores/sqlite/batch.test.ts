import { randomUUID } from "node:crypto";
import type { D1Database } from "@cloudflare/workers-types";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportWorkerdCoverage, startWorker } from "../../support/cloudflare-bundle.js";

// The inbox on databases whose atomic unit is a batch (src/stores/sqlite/batch.ts): what a
// handler may return there, on a real D1 binding called from this process (miniflare's proxy) and
// on a Durable Object's SQLite storage inside workerd (test/fixtures/cloudflare/sqlite-worker.ts,
// its `/do/returns` route). A handler that returns something other than a list of statements is
// a mistake in the app's code: it is refused as the handler's own error (500, never recorded),
// saying what to return, not run into the batch, where it would fail as the store's (503) on every
// retry. Under Stryker the mutant switched on here is switched on in workerd too.

const newId = () => `evt_${randomUUID()}`;

let mf: Miniflare;
let d1: D1Database;
beforeAll(async () => {
  mf = await startWorker(
    "test/fixtures/cloudflare/sqlite-worker.ts",
    {
      bindings: { WEBHOOK_SECRET: "whsec-sqlite-batch-test", CASE_SECRETS: "[]", CASE_LIMIT: 0 },
      d1Databases: ["DB"],
      durableObjects: { INBOX: { className: "InboxObject", useSQLite: true } },
    },
    { stryker: true },
  );
  d1 = (await mf.getD1Database("DB")) as unknown as D1Database;
  await d1.prepare("create table if not exists batch_effects (event_id text not null)").run();
}, 60_000);
afterAll(async () => {
  await reportWorkerdCoverage(async () => (await mf.dispatchFetch("http://worker/__stryker_coverage")).json());
  await mf?.dispose();
});

describe("D1: what a handler returns", () => {
  const effects = async (id: string) =>
    Number((await d1.prepare("select count(*) as n from batch_effects where event_id = ?").bind(id).first())?.n);
  const write = (id: string) => d1.prepare("insert into batch_effects (event_id) values (?)").bind(id);
  const inbox = () => new SqliteInbox(d1, { scope: `batch-${randomUUID()}` });

  it("nothing (undefined or null) records the id alone: the handler ran, a copy is a duplicate", async () => {
    for (const nothing of [undefined, null]) {
      const store = inbox();
      await store.migrate();
      let runs = 0;
      const onEvent = store.handle(() => {
        runs++;
        return nothing as never; // null, as an untyped handler may return
      });
      const id = newId();
      expect(await onEvent({ id } as WebhookEvent), String(nothing)).toBeUndefined();
      expect(await onEvent({ id } as WebhookEvent), String(nothing)).toMatchObject({ status: 204 });
      expect(runs, String(nothing)).toBe(1);
    }
  });

  it("anything else than a list of prepared statements is the handler's TypeError, saying what to return; nothing is written or recorded", async () => {
    const store = inbox();
    await store.migrate();
    const list = "returns an array of statements (or nothing)";
    const statements = "an array of db.prepare(sql).bind(...) statements";
    const wrong: [label: string, returns: (id: string) => unknown, says: string][] = [
      ["one statement, not in a list", (id) => write(id), list],
      ["a reply", () => ({ status: 202 }), list],
      ["SQL text", () => "insert into batch_effects (event_id) values ('x')", list],
      ["a list with SQL text", () => ["insert into batch_effects (event_id) values ('x')"], statements],
      ["a list with null", (id) => [write(id), null], statements],
      [
        "a list with a plain object",
        (id) => [{ sql: "insert into batch_effects (event_id) values (?)", params: [id] }],
        statements,
      ],
    ];
    for (const [label, returns, says] of wrong) {
      const id = newId();
      const refused = await store
        .handle((event) => returns(event.id) as never)({ id } as WebhookEvent)
        .catch((error: unknown) => error);
      expect(refused, label).toBeInstanceOf(TypeError);
      expect((refused as Error).message, label).toContain(says);
      expect(await effects(id), label).toBe(0);
      // Not recorded: the retry, with the handler fixed, runs and writes once.
      expect(await store.handle((event) => [write(event.id)])({ id } as WebhookEvent), label).toBeUndefined();
      expect(await effects(id), label).toBe(1);
    }
  });
});

describe("a Durable Object's SQLite storage: what a handler returns", () => {
  const call = async (id: string, returns: string) => {
    const answer = await mf.dispatchFetch("http://worker/do/returns", {
      method: "POST",
      body: JSON.stringify({ id, returns }),
    });
    return (await answer.json()) as { result?: unknown; error?: { name: string; message: string } };
  };
  const effects = async (id: string) =>
    (await (await mf.dispatchFetch(`http://worker/do/effects?id=${encodeURIComponent(id)}`)).json()) as number;

  it("a list of [sql, ...bindings] runs with the id, once; a copy is a duplicate", async () => {
    const id = newId();
    expect(await call(id, "statements")).toEqual({ result: null });
    expect(await call(id, "statements")).toMatchObject({ result: { status: 204 } });
    expect(await effects(id)).toBe(1);
  });

  it("nothing (undefined or null) records the id alone", async () => {
    for (const nothing of ["nothing", "null"]) {
      const id = newId();
      expect(await call(id, nothing), nothing).toEqual({ result: null });
      expect(await call(id, "statements"), nothing).toMatchObject({ result: { status: 204 } });
      expect(await effects(id), nothing).toBe(0);
    }
  });

  it("a statement that is not [sql, ...bindings] is the handler's TypeError, saying what to return; nothing is written or recorded", async () => {
    for (const wrong of ["one", "nested", "object"]) {
      const id = newId();
      const { error } = await call(id, wrong);
      expect(error?.name, wrong).toBe("TypeError");
      expect(error?.message, wrong).toContain("an array of [sql, ...bindings]");
      expect(await effects(id), wrong).toBe(0);
      expect(await call(id, "statements"), wrong).toEqual({ result: null });
      expect(await effects(id), wrong).toBe(1);
    }
  });
});

it("an object with a Durable Object storage's sql.exec but no transactionSync is no database the inbox knows", () => {
  expect(() => new SqliteInbox({ sql: { exec: () => [] } } as never, { scope: "s" })).toThrow(
    /needs a SQLite database/,
  );
});
