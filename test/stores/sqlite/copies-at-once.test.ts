import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { ADAPTERS, closeReceivers, type Reply, type Send } from "../../support/adapter-receivers.js";
import { eventJson } from "../../support/deliveries.js";
import { databaseFile, receiver } from "../../support/sqlite.js";

// Many copies of one event at the same moment, through four adapters (Express, Koa, fetch,
// Lambda) sharing one SqliteInbox on one better-sqlite3 connection, with a handler that awaits
// inside its transaction: deliveries take turns on the one writer, each event's writes through tx
// happen exactly once, and every copy is answered 2xx (the handled one or a duplicate).

const EVENTS = 30;
const COPIES = 6;

afterAll(async () => {
  await closeReceivers();
});

describe("SqliteInbox: copies of each event at once, through four adapters", () => {
  it(`${EVENTS} events × ${COPIES} copies at once, the handler awaiting 10 ms in its transaction: one effect each, all 2xx`, async () => {
    const db = new Database(databaseFile());
    db.pragma("journal_mode = wal");
    db.exec("create table effects (event_id text not null, via text not null)");
    const inbox = new SqliteInbox(db, { scope: "copies-at-once" });
    await inbox.migrate();
    let runs = 0;
    const sends: Send[] = [];
    for (const adapter of ADAPTERS) {
      sends.push(
        await receiver(
          adapter,
          inbox.handle(async (event, tx) => {
            runs++;
            tx.prepare("insert into effects (event_id, via) values (?, ?)").run(event.id, adapter);
            await sleep(10);
          }),
        ),
      );
    }
    const tally = new Map<string, number>();
    const began = performance.now();
    const ids = Array.from({ length: EVENTS }, () => `evt_${randomUUID()}`);
    const answers: Reply[] = await Promise.all(
      ids.flatMap((id, e) =>
        Array.from({ length: COPIES }, () => eventJson(id)).map((text, copy) =>
          (sends[(e + copy) % sends.length] as Send)(text),
        ),
      ),
    );
    const seconds = (performance.now() - began) / 1000;
    for (const answer of answers) {
      const key = `${answer.status}${answer.headers["webhook-duplicate"] === "true" ? " duplicate" : ""}`;
      tally.set(key, (tally.get(key) ?? 0) + 1);
    }
    expect(Object.fromEntries(tally)).toEqual({ "204": EVENTS, "204 duplicate": EVENTS * (COPIES - 1) });
    expect(db.prepare("select event_id from effects group by event_id having count(*) <> 1").all()).toEqual([]);
    expect(db.prepare("select count(*) as n from effects").get()).toEqual({ n: EVENTS });
    expect(runs).toBe(EVENTS);
    console.info(`sqlite copies at once: ${EVENTS * COPIES} copies in ${seconds.toFixed(1)} s, ${runs} handler runs`);
    db.close();
  });
});
