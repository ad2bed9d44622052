import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import type { WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { closeReceivers } from "../../support/adapter-receivers.js";
import { eventJson as body } from "../../support/deliveries.js";
import { databaseFile, receiver } from "../../support/sqlite.js";

// Attacked: handlerTimeout (handler-deadline.test.ts has one handler that hangs and wakes to write)
// with two handlers past it at once on one connection, each waking after a third delivery was
// handled, writing through tx and then throwing. Held: both answered 500, their late writes
// refused and their throws reaching no one (no unhandled rejection), the third handled meanwhile,
// and each retry runs its handler once.

afterAll(closeReceivers);
const closing: { close(): void }[] = [];
afterAll(() => {
  for (const c of closing) c.close();
});

describe("SqliteInbox on better-sqlite3, attacked: handlers that outlive handlerTimeout", () => {
  it("two at once, each waking after a third was handled to write and throw: 500 each, late writes refused, each retry handled once", async () => {
    const db = new Database(databaseFile());
    closing.push(db);
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null)");
    await new SqliteInbox(db, { scope: "setup" }).migrate();
    let wake = () => {};
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const hanging = new Set<string>();
    const late: string[] = [];
    let lateDone = () => {};
    const bothLate = new Promise<void>((resolve) => {
      lateDone = resolve;
    });
    const runs = new Map<string, number>();
    const errors: unknown[] = [];
    const inbox = new SqliteInbox(db, { scope: "late", handlerTimeout: 200, timeout: 3000 });
    const send = await receiver(
      "Express",
      inbox.handle(async (event: WebhookEvent, tx: Database.Database) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        tx.prepare("insert into effects (event_id) values (?)").run(event.id);
        if (!hanging.delete(event.id)) return;
        await woken;
        try {
          tx.prepare("insert into effects (event_id) values (?)").run(`${event.id}-late`);
          late.push("wrote");
        } catch (error) {
          late.push((error as Error).message.slice(0, 46));
        }
        if (late.length === 2) lateDone();
        throw new Error("thrown past handlerTimeout");
      }),
      { onError: (error) => void errors.push(error) },
    );
    const ids = [`evt_${randomUUID()}`, `evt_${randomUUID()}`];
    for (const id of ids) hanging.add(id);
    const answers = await Promise.all(ids.map((id) => send(body(id))));
    const third = `evt_${randomUUID()}`;
    const thirdAnswer = await send(body(third));
    wake();
    await bothLate;
    const retries = await Promise.all(ids.map((id) => send(body(id))));
    const copies = await Promise.all(ids.map((id) => send(body(id))));
    const count = (id: string) =>
      (db.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n;
    expect([answers.map((a) => a.status), thirdAnswer.status, count(third)]).toEqual([[500, 500], 204, 1]);
    expect(late).toEqual(Array(2).fill("flag-webhooks: the inbox's transaction has end"));
    expect(retries.map((a) => a.status)).toEqual([204, 204]);
    expect(copies.map((a) => a.headers["webhook-duplicate"])).toEqual(["true", "true"]);
    expect(ids.map((id) => [runs.get(id), count(id), count(`${id}-late`)])).toEqual([
      [2, 1, 0],
      [2, 1, 0],
    ]);
    expect(errors.map((error) => (error as Error).message)).toEqual(
      Array(2).fill("flag-webhooks: the handler did not finish within handlerTimeout (200 ms)"),
    );
  });
});
