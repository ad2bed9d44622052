import { createClient } from "@libsql/client";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { isBusy, isStoreFailure, sqliteCode, Turns } from "../../../src/stores/sqlite/turns.js";
import { databaseFile } from "../../support/sqlite.js";

// The one turn per connection, and how the inbox reads a driver's error: the rules of
// src/stores/sqlite/turns.ts on their own, beside the inbox tests that reach them through
// deliveries (inbox.test.ts: a delivery that waits past timeout, then the retry runs).

const expired = () => new Error("expired");
const soon = (ms = 1_000) => Date.now() + ms;

describe("Turns", () => {
  it("gives the turn back once: a second call of the same giver hands nothing to the next in line", async () => {
    const turns = new Turns();
    const give = await turns.take(soon(), expired);
    const granted: string[] = [];
    const second = turns.take(soon(), expired).then((giveBack) => {
      granted.push("second");
      return giveBack;
    });
    const third = turns.take(soon(200), expired).then(
      () => granted.push("third"),
      () => granted.push("third expired"),
    );
    give();
    give();
    const giveSecond = await second;
    await third;
    expect(granted).toEqual(["second", "third expired"]);
    expect(turns.free).toBe(false);
    giveSecond();
    giveSecond();
    expect(turns.free).toBe(true);
  });

  it("holdNow() takes the turn only when nobody holds it (a handler's transaction may), and giveBack() hands it on", async () => {
    const turns = new Turns();
    const give = await turns.take(soon(), expired);
    expect(turns.holdNow()).toBe(false);
    give();
    expect(turns.holdNow()).toBe(true);
    expect(turns.free).toBe(false);
    expect(turns.holdNow()).toBe(false);
    const next = turns.take(soon(), expired);
    turns.giveBack();
    const giveNext = await next;
    expect(turns.free).toBe(false);
    giveNext();
    expect(turns.free).toBe(true);
  });

  it("a waiter whose deadline passes leaves the line: the turn given back is free, not handed to it", async () => {
    const turns = new Turns();
    const give = await turns.take(soon(), expired);
    await expect(turns.take(soon(20), expired)).rejects.toThrow("expired");
    give();
    expect(turns.free).toBe(true);
    const again = await turns.take(soon(), expired);
    again();
  });
});

const files: { close(): void }[] = [];
afterAll(() => {
  for (const file of files) file.close();
});

describe("sqliteCode: the primary result code, however the driver spells it", () => {
  it("better-sqlite3: a write while another connection holds the lock is BUSY, a store failure", () => {
    const file = databaseFile();
    const [a, b] = [new Database(file, { timeout: 0 }), new Database(file, { timeout: 0 })];
    files.push(a, b);
    a.exec("create table t (x)");
    a.exec("begin immediate");
    let error: unknown;
    try {
      b.exec("begin immediate");
    } catch (caught) {
      error = caught;
    }
    a.exec("rollback");
    expect([sqliteCode(error), isBusy(error), isStoreFailure(error)]).toEqual(["BUSY", true, true]);
  });

  it("@libsql/client on a local file: a write on a query-only connection is READONLY, a failed statement no store failure", async () => {
    const file = databaseFile();
    const setup = new Database(file);
    setup.exec("create table t (x)");
    setup.close();
    const client = createClient({ url: `file:${file}` });
    files.push(client);
    await client.execute("pragma query_only = 1");
    const failed = await client.execute("insert into t values (1)").catch((error: unknown) => error);
    expect([sqliteCode(failed), isBusy(failed), isStoreFailure(failed)]).toEqual(["READONLY", false, true]);
    const bad = await client.execute("select * from missing").catch((error: unknown) => error);
    expect([isBusy(bad), isStoreFailure(bad)]).toEqual([false, false]);
  });

  // node:sqlite (Node 22+, not this process's Node 20) gives `errcode`, a libSQL server `rawCode`,
  // both the extended code, whose low byte is the primary one.
  it("node:sqlite's errcode and a libSQL server's rawCode, extended codes included; LOCKED waits as BUSY does", () => {
    expect(sqliteCode({ errcode: 13 })).toBe("FULL");
    expect(sqliteCode({ errcode: 5 | (2 << 8) })).toBe("BUSY");
    expect(sqliteCode({ rawCode: 8 | (1 << 8) })).toBe("READONLY");
    expect(sqliteCode({ errno: 10 | (3 << 8) })).toBe("IOERR");
    expect(sqliteCode({ code: "SQLITE_IOERR_WRITE" })).toBe("IOERR");
    expect(sqliteCode({ code: "ERR_SQLITE_ERROR", errcode: 26 })).toBe("NOTADB");
    expect([isBusy({ errcode: 6 }), isStoreFailure({ errcode: 6 })]).toEqual([true, true]);
    expect([isBusy({ errcode: 1 }), isStoreFailure({ errcode: 1 }), sqliteCode({ errcode: 1 })]).toEqual([
      false,
      false,
      undefined,
    ]);
    for (const [code, name] of [
      [7, "NOMEM"],
      [11, "CORRUPT"],
      [14, "CANTOPEN"],
    ] as const) {
      expect([sqliteCode({ errcode: code }), isStoreFailure({ errcode: code }), isBusy({ errcode: code })]).toEqual([
        name,
        true,
        false,
      ]);
    }
    // SQLITE_PROTOCOL is told apart, but is no failure of the store the inbox answers 503 for.
    expect([sqliteCode({ errcode: 15 }), isStoreFailure({ errcode: 15 })]).toEqual(["PROTOCOL", false]);
  });

  it("a message that says the database is locked, and nothing else, is BUSY; anything else has no code", () => {
    expect(sqliteCode(new Error("SQLITE_BUSY: Database Is Locked"))).toBe("BUSY");
    expect(sqliteCode({ code: "EBUSY", message: "resource busy" })).toBeUndefined();
    expect(sqliteCode(null)).toBeUndefined();
    expect(sqliteCode({ code: 5 })).toBeUndefined();
    expect(sqliteCode({ errcode: "5" })).toBeUndefined();
  });
});
