import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// Attack on the inbox's one-statement writes on better-sqlite3 while an app's statement is still
// running on the inbox's connection (an `UPDATE … RETURNING` iterated halfway): the event must be
// refused, not kept by half, and the app's busy_timeout must be its own after. SQLite applies
// `PRAGMA busy_timeout = N` when the statement is prepared, and compiles it again for each later
// run: the inbox's prepared pragma statements change the setting at their first preparation.

describe("better-sqlite3: an app's statement still running on the inbox's connection", () => {
  const opened: Database.Database[] = [];
  const iterators: IterableIterator<unknown>[] = [];
  afterAll(() => {
    for (const iterator of iterators) iterator.return?.();
    for (const db of opened) if (db.open) db.close();
  });

  /** A WAL file with the app's busy_timeout, its inbox, and an app table whose UPDATE … RETURNING is left iterated halfway. */
  async function setUp() {
    const file = databaseFile();
    const db = new Database(file);
    opened.push(db);
    db.pragma("journal_mode = wal");
    db.pragma("busy_timeout = 3210");
    const inbox = new SqliteInbox(db, { scope: "attack", timeout: "300ms" });
    await inbox.migrate();
    db.exec("create table app (x integer); insert into app values (1), (2), (3)");
    const keep = inbox.enqueue();
    const status = async (id: string) => {
      try {
        const reply = (await keep(createEvent("flag.updated", { id }) as WebhookEvent)) as
          | { status?: number }
          | undefined;
        return reply?.status ?? 204;
      } catch (error) {
        return (error as { status?: number }).status ?? 500;
      }
    };
    const reader = new Database(file, { readonly: true });
    opened.push(reader);
    const kept = (id: string) =>
      (reader.prepare("select count(*) as n from flag_webhooks_inbox where id = ?").get(id) as { n: number }).n;
    // Read through a statement prepared before the iterator (better-sqlite3 refuses db.pragma()
    // while it runs) and run once now: a prepared pragma's first run gives the value it was
    // compiled with; SQLite compiles it again for each later run, which then reads the current one.
    const timeout = db.prepare("pragma busy_timeout");
    const busyTimeout = () => (timeout.get() as { timeout: number }).timeout;
    expect(busyTimeout()).toBe(3210);
    const iterator = db.prepare("update app set x = x + 10 returning x").iterate();
    iterators.push(iterator);
    iterator.next();
    return { busyTimeout, status, kept, finish: () => Array.from(iterator).length };
  }

  // Held: better-sqlite3 refuses any write statement on a connection while an iterator runs
  // ("This database connection is busy executing a query"), so the event is refused, not deferred.
  it("an UPDATE … RETURNING iterated halfway: the delivery is 503, nothing kept; once it ends, kept and 202", async () => {
    const { status, kept, finish } = await setUp();
    const id = `evt_${randomUUID()}`;
    expect(await status(id)).toBe(503);
    finish();
    expect(kept(id)).toBe(0);
    expect(await status(id)).toBe(202);
    expect(kept(id)).toBe(1);
  });

  // Broken while the inbox set it by prepared pragmas (fixed: set by exec, as before): SQLite applies `PRAGMA busy_timeout = N` when the statement is prepared, not when it
  // runs. The inbox's first one-statement write prepares `pragma busy_timeout = 0` (the timeout is
  // then 0), its run throws (the connection is busy with the app's iterator), and the app's value
  // is never put back: the app's 3210 ms read 0 after that one refused delivery, and still 0 after
  // 5 more accepted ones (the inbox reads 0 as the app's own from then on), 1 of 1 runs: the
  // app's own writes then fail SQLITE_BUSY at once instead of waiting 3.2 s. A fix must put the
  // app's value back whenever the statement setting 0 was prepared, even if its run throws (or set
  // it through a statement whose preparing has no effect, e.g. exec inside the try).
  it("the first delivery refused that way: the app's busy_timeout is its own again, after it and after 5 more", async () => {
    const { busyTimeout, status, finish } = await setUp();
    const seen: number[] = [];
    expect(await status(`evt_${randomUUID()}`)).toBe(503);
    seen.push(busyTimeout());
    finish();
    for (let i = 0; i < 5; i++) expect(await status(`evt_${randomUUID()}`)).toBe(202);
    seen.push(busyTimeout());
    expect(seen).toEqual([3210, 3210]);
  });
});
