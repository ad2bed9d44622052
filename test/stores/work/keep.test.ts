import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { databaseFile } from "../../support/sqlite.js";

// Keep-then-work (src/stores/work/keep.ts) attacked from outside, on a real SQLite file through
// better-sqlite3: what the looking-and-acting calls do with the ids they list themselves.

const closing: (() => unknown)[] = [];
afterAll(() => {
  for (const close of closing.splice(0)) close();
});

function inboxOnFile(scope: string): { db: Database.Database; inbox: SqliteInbox } {
  const db = new Database(databaseFile());
  closing.push(() => db.close());
  const inbox = new SqliteInbox(db, { scope });
  inbox.migrate();
  return { db, inbox };
}

describe("keep then work: ids the store keeps hashed (over 1 KiB, with U+0000)", () => {
  // parked() and pending() list such an event under its stored id (`#` and a SHA-256); replay(),
  // purge() and kept() take that listed id as it is (hashing it again found nothing), as well as
  // the event's own id.
  for (const [name, id] of [
    ["an id of 1,100 bytes", `evt_${"x".repeat(1_096)}`],
    ["an id with U+0000", "evt_\u0000nul"],
  ] as const) {
    it(`${name}: the id parked() lists replays the event, and purge() deletes it`, async () => {
      const { db, inbox } = inboxOnFile("hashed");
      await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
      // A body the parser refuses parks the event at its first attempt.
      db.prepare("update flag_webhooks_inbox set body = 'not json'").run();
      const worker = inbox.work(() => {}, { interval: false });
      expect(await worker.drain()).toBe(1);
      const [listed] = await inbox.parked();
      expect(listed?.state).toBe("parked");
      expect(await inbox.kept(listed?.id as string)).toMatchObject({ state: "parked" });
      expect(await inbox.replay(listed?.id as string)).toBe(1);
      expect(await inbox.purge(listed?.id as string)).toBe(1);
      await worker.close();
    });
  }

  it("the event's own id finds it, as the store's one rule says", async () => {
    const id = `evt_${"y".repeat(1_096)}`;
    const { inbox } = inboxOnFile("own-id");
    await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
    expect(await inbox.kept(id)).toMatchObject({ state: "pending" });
    const ran: string[] = [];
    const worker = inbox.work((event) => void ran.push(event.id), { interval: false });
    expect(await worker.drain()).toBe(1);
    expect(ran).toEqual([id]);
    expect(await inbox.kept(id)).toMatchObject({ state: "done" });
    await worker.close();
  });
});

describe("keep then work: a handler that ignores its deadline, on SQLite's one connection", () => {
  it("its late write through tx, made while the next attempt's transaction is open, is refused: the effect once", async () => {
    const { db, inbox } = inboxOnFile("late");
    db.exec("create table effects (event_id text not null, attempt integer not null)");
    await inbox.enqueue()(createEvent("flag.updated", { id: "evt_late" }) as never);
    const secondWrote = deferred();
    const lateDone = deferred();
    let late = "";
    const write = (tx: unknown, id: string, attempt: number) =>
      (tx as Database.Database).prepare("insert into effects values (?, ?)").run(id, attempt);
    const worker = inbox.work(
      async (event, tx, { attempt, signal }) => {
        if (attempt === 1) {
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          // Past its deadline, and once the retry's transaction is open on the same connection.
          await secondWrote.promise;
          try {
            write(tx, event.id, attempt);
            late = "written";
          } catch (error) {
            late = (error as Error).message;
          }
          lateDone.resolve();
          return;
        }
        write(tx, event.id, attempt);
        secondWrote.resolve();
        await lateDone.promise;
      },
      { interval: false, deadline: 100, lease: "1m", retries: ["1ms"], jitter: 0 },
    );
    // The retry is due 1 ms after the first attempt's failure: one drain runs both.
    expect(await worker.drain()).toBe(2);
    expect(late).toMatch(/transaction has ended/);
    expect(db.prepare("select attempt from effects").all()).toEqual([{ attempt: 2 }]);
    expect(await inbox.kept("evt_late")).toMatchObject({ state: "done", attempts: 2 });
    await worker.close();
  });
});

describe("keep then work: more events taken at once than one connection runs at once", () => {
  // SQLite's one connection runs one attempt's transaction at a time: a worker of concurrency 12
  // that took 12 events, counting an attempt of each, had the others queue for its turn with their
  // deadline running, and events whose handler succeeds in 100 ms under a deadline of 500 ms spent
  // their attempts waiting and ended parked (4 of 12). A worker takes no more events than the
  // database runs at once (one, here), and the handler's deadline starts once its transaction began.
  it("a handler that succeeds in 100 ms under a deadline of 500 ms parks no event", async () => {
    const { db, inbox } = inboxOnFile("crowd");
    db.exec("create table effects (event_id text not null)");
    const ids = Array.from({ length: 12 }, (_, i) => `evt_crowd_${i}`);
    for (const id of ids) await inbox.enqueue()(createEvent("flag.updated", { id }) as never);
    const runs = new Map<string, number>();
    const worker = inbox.work(
      async (event, tx) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 100));
        (tx as Database.Database).prepare("insert into effects values (?)").run(event.id);
      },
      { interval: false, concurrency: 12, deadline: 500, retries: ["1ms"], jitter: 0 },
    );
    await worker.drain();
    await worker.close();
    const parked = await inbox.parked();
    const neverRan = parked.filter((event) => !runs.has(event.id)).length;
    expect({ parked: parked.length, neverRan }).toEqual({ parked: 0, neverRan: 0 });
  }, 30_000);
});

describe("keep then work: close() while a handler hangs for ever, ignoring its signal", () => {
  it("resolves once the attempt passed its deadline, and the event is pending for its retry", async () => {
    const { inbox } = inboxOnFile("hang");
    await inbox.enqueue()(createEvent("flag.updated", { id: "evt_hang" }) as never);
    let started = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const worker = inbox.work(
      () => {
        started();
        return new Promise<void>(() => {});
      },
      { interval: 10, deadline: 150, lease: "1m", retries: ["1h"], jitter: 0 },
    );
    await running;
    await worker.close();
    expect(await inbox.kept("evt_hang")).toMatchObject({ state: "pending", attempts: 1 });
  });
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

describe("keep then work: a copy kept on the waiting path", () => {
  // A delivery that cannot be kept at once (the write lock held elsewhere) waits for its own
  // COMMIT; a copy of a kept event found there is a duplicate, as one found at once is.
  for (const [name, options] of [
    ["groupCommit: false", { groupCommit: false }],
    ["group commit", {}],
  ] as const) {
    it(`${name}: a copy that waited for the write lock is answered as a duplicate`, async () => {
      const file = databaseFile();
      const db = new Database(file);
      db.pragma("journal_mode = wal");
      const other = new Database(file);
      closing.push(
        () => db.close(),
        () => other.close(),
      );
      const inbox = new SqliteInbox(db, { scope: "copy-waited", timeout: "3s" });
      await inbox.migrate();
      const keep = inbox.enqueue(options);
      const event = createEvent("flag.updated", { id: "evt_copy_waited" }) as never;
      expect(await keep(event)).toEqual({ status: 202 });
      other.exec("begin immediate");
      const copy = keep(event);
      await new Promise((resolve) => setTimeout(resolve, 50));
      other.exec("rollback");
      expect(await copy).toEqual({ status: 204, headers: { "webhook-duplicate": "true" } });
    });
  }
});
