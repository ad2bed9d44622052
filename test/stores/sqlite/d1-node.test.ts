import { randomUUID } from "node:crypto";
import type { D1Database } from "@cloudflare/workers-types";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker } from "../../support/cloudflare-bundle.js";

// SqliteInbox on a real D1 binding (miniflare's proxy of it) called in this process, as a queue
// consumer calls handle(): the inbox's batch path run in Node, where d1.test.ts runs it in the
// Worker's bundle in workerd (which a mutant switched on in this process does not reach).

let mf: Miniflare;
let d1: D1Database;
beforeAll(async () => {
  mf = await startWorker("test/fixtures/cloudflare/sqlite-worker.ts", { d1Databases: ["DB"] });
  d1 = (await mf.getD1Database("DB")) as unknown as D1Database;
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

describe("SqliteInbox on D1, called from Node (miniflare's proxy of the binding)", () => {
  const d1Effects = async (id: string) =>
    Number((await d1.prepare("select count(*) as n from node_effects where event_id = ?").bind(id).first())?.n);
  const write = (event: { id: string }) => [
    d1.prepare("insert into node_effects (event_id) values (?)").bind(event.id),
  ];
  beforeAll(async () => {
    await d1.prepare("create table if not exists node_effects (event_id text not null)").run();
  });

  it("handle(): the returned statements commit with the id; a copy is a duplicate; a throw writes nothing and its retry runs", async () => {
    const inbox = new SqliteInbox(d1, { scope: "node-handle" });
    await inbox.migrate();
    let runs = 0;
    const failing = new Set<string>();
    const onEvent = inbox.handle((event) => {
      runs++;
      if (failing.delete(event.id)) throw new Error("fails once");
      return write(event);
    });
    const id = `evt_${randomUUID()}`;
    failing.add(id);
    await expect(onEvent({ id } as WebhookEvent)).rejects.toThrow("fails once");
    expect(await d1Effects(id)).toBe(0);
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect([runs, await d1Effects(id)]).toEqual([2, 1]);
  });

  it("an id a DedupeStore claim of the scope holds is in progress (409), not a duplicate; once completed, a duplicate", async () => {
    const inbox = new SqliteInbox(d1, { scope: "node-claimed" });
    await inbox.migrate();
    const id = `evt_${randomUUID()}`;
    expect(await inbox.claim(id, 60_000)).toBe("claimed");
    const onEvent = inbox.handle(write);
    await expect(onEvent({ id } as WebhookEvent)).rejects.toMatchObject({ code: "delivery_in_progress", status: 409 });
    await inbox.complete(id, 60_000);
    expect(await onEvent({ id } as WebhookEvent)).toMatchObject({ status: 204 });
    expect(await d1Effects(id)).toBe(0);
  });

  it("an id past its retention runs again (its expired row replaced), and prune() deletes and counts the expired ids", async () => {
    const inbox = new SqliteInbox(d1, { scope: "node-expiry", retention: 50 });
    await inbox.migrate();
    const onEvent = inbox.handle(write);
    const id = `evt_${randomUUID()}`;
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(await onEvent({ id } as WebhookEvent)).toBeUndefined();
    expect(await d1Effects(id)).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(await inbox.prune()).toBe(1);
    expect(await inbox.prune()).toBe(0);
  });

  it("a table never migrated: 503 store_unavailable, the handler not run", async () => {
    let runs = 0;
    const onEvent = new SqliteInbox(d1, { scope: "node-missing", table: "never_made" }).handle(() => {
      runs++;
    });
    await expect(onEvent({ id: `evt_${randomUUID()}` } as WebhookEvent)).rejects.toMatchObject({
      code: "store_unavailable",
      status: 503,
      message: "the SQLite inbox is unavailable; retry later",
    });
    expect(runs).toBe(0);
  });

  it("migrate() creates the table it names; the order option, which needs a transaction held open, is refused", async () => {
    await new SqliteInbox(d1, { scope: "node-migrate", table: "made_by_migrate" }).migrate();
    const made = await d1.prepare("select name from sqlite_master where name = 'made_by_migrate'").first();
    expect(made).toEqual({ name: "made_by_migrate" });
    expect(() => new SqliteInbox(d1, { scope: "node-order", order: true })).toThrow(
      new TypeError('flag-webhooks: option "order" of SqliteInbox needs a database with interactive transactions'),
    );
  });
});
