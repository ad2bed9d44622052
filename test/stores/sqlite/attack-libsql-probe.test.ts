import { randomUUID } from "node:crypto";
import { type Client, createClient } from "@libsql/client";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { statusOf } from "../../support/deliveries.js";
import { databaseFile } from "../../support/sqlite.js";

// Attack on libSQL's lock probe: on a local file the inbox takes the write lock with
// `update <table> set id = id where 0` (before its table exists, `pragma user_version = <its
// value>`). What must hold: the probe changes nothing the app can see: no UPDATE trigger of the
// app's on the inbox's table fires for it, the app's user_version stays the app's.

const APP = 3210;
const clients: Client[] = [];
afterAll(() => {
  for (const client of clients) client.close();
});
const eventOf = (id: string) => createEvent("flag.updated", { id }) as WebhookEvent;

describe("libSQL, a local file: the inbox's lock probe", () => {
  it("an app's UPDATE triggers on the inbox's table never fire for fresh deliveries (handle() and enqueue())", async () => {
    const client = createClient({ url: `file:${databaseFile()}`, timeout: APP });
    clients.push(client);
    await client.execute("pragma journal_mode = wal");
    const inbox = new SqliteInbox(client, { scope: "probe" });
    await inbox.migrate();
    await client.executeMultiple(`
      create table app_log (what text);
      create trigger app_before before update on flag_webhooks_inbox begin insert into app_log values ('before'); end;
      create trigger app_after after update on flag_webhooks_inbox begin insert into app_log values ('after'); end;
      create trigger app_refuse before update of id on flag_webhooks_inbox begin select raise(abort, 'no update of id'); end;`);
    const handle = inbox.handle(async () => {});
    const keep = inbox.enqueue();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push(await statusOf(handle(eventOf(`evt_${randomUUID()}`))));
    for (let i = 0; i < 5; i++) statuses.push(await statusOf(keep(eventOf(`evt_${randomUUID()}`))));
    const fired = (await client.execute("select count(*) as n from app_log")).rows[0]?.n;
    console.log(`libSQL probe, 10 fresh deliveries: ${statuses.join(" ")}; triggers fired ${fired} times`);
    expect(statuses).toEqual([204, 204, 204, 204, 204, 202, 202, 202, 202, 202]);
    expect(Number(fired)).toBe(0);
  });

  // Sequential only: the app setting it on another of the client's connections between the
  // probe's read and write is refused by SQLite itself (the read holds the snapshot).
  it("before the table exists, the app's user_version set before each first migrate() is never put back", async () => {
    const file = databaseFile();
    const client = createClient({ url: `file:${file}`, timeout: APP });
    clients.push(client);
    const inbox = new SqliteInbox(client, { scope: "probe" });
    const seen: number[] = [];
    for (let version = 1; version <= 5; version++) {
      await client.execute(`pragma user_version = ${version}`);
      // The first migrate() takes the lock while the table does not exist yet.
      await inbox.migrate();
      seen.push(Number((await client.execute("pragma user_version")).rows[0]?.user_version));
      await client.execute(`drop table if exists flag_webhooks_inbox`);
    }
    console.log(`libSQL probe, user_version after each migrate: ${seen.join(" ")}`);
    expect(seen).toEqual([1, 2, 3, 4, 5]);
  });
});
