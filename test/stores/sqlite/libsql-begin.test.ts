import { createClient } from "@libsql/client";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// How the inbox takes the write lock on a libSQL client (a local file) before its table exists:
// the first migrate() takes it by writing the file's user_version with the value it has, so the
// app's own user_version (a migration tool's counter) is left as it was.

const clients: { close(): void }[] = [];
afterAll(() => {
  for (const client of clients) client.close();
});

describe("libSQL, a local file: the first migrate()", () => {
  it("leaves the app's user_version as it was, and creates the inbox's table", async () => {
    const client = createClient({ url: `file:${databaseFile()}` });
    clients.push(client);
    await client.execute("pragma user_version = 7");
    await new SqliteInbox(client, { scope: "begin" }).migrate();
    expect((await client.execute("pragma user_version")).rows[0]?.[0]).toBe(7);
    const tables = await client.execute("select name from sqlite_master where type = 'table'");
    expect(tables.rows.map((row) => row[0])).toContain("flag_webhooks_inbox");
  });
});
