import Database from "better-sqlite3";
import fc from "fast-check";
import type { KnownWebhookEvent, WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { checkHistory, histories, propertyRuns } from "../../support/order.js";
import { databaseFile, SQLITE_SECRET } from "../../support/sqlite.js";

// Order in the SQLite inbox: the flag's positions are read and written in the handler's
// transaction, on a real file (better-sqlite3, WAL).

const db = new Database(databaseFile());
db.pragma("journal_mode = wal");
// Commits durable to the WAL, not to the disk: a property test of 1,000 runs is not a crash test.
db.pragma("synchronous = normal");
afterAll(() => db.close());

let runs = 0;
/** A fetch receiver on an ordered inbox of a scope of its own; the handler writes down what it saw, and may fail. */
async function receiver(fail: (event: WebhookEvent) => boolean = () => false) {
  const inbox = new SqliteInbox(db, { scope: `order-${++runs}`, order: true });
  await inbox.migrate();
  const seen: WebhookEvent[] = [];
  const handle = webhookHandler({
    secret: SQLITE_SECRET,
    onError: () => {},
    onEvent: inbox.handle(async (event) => {
      await new Promise((resolve) => setImmediate(resolve));
      if (fail(event)) throw new Error("the handler failed");
      seen.push(event);
    }),
  });
  const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SQLITE_SECRET, event }));
  return { seen, send, inbox };
}

describe("SqliteInbox with order", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once (1,000 runs of up to 6 events)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(6), async (history) => {
        await checkHistory(history, async (delivered) => {
          const { seen, send } = await receiver();
          const answers = await Promise.all(delivered.map(send));
          expect(answers.every((answer) => answer.status === 204)).toBe(true);
          return seen;
        });
      }),
      { numRuns: propertyRuns(1000) },
    );
  }, 120_000);

  it("commits positions with the handler's transaction: a failed newer event leaves an older one fresh", async () => {
    const { seen, send } = await receiver((event) => event.id === "evt_2");
    const at = (id: string, createdAt: string) => createEvent("flag.updated", { id, createdAt });
    expect((await send(at("evt_2", "2026-11-21T09:02:00Z"))).status).toBe(500);
    const older = await send(at("evt_1", "2026-11-21T09:01:00Z"));
    expect([older.status, older.headers.get("webhook-stale")]).toEqual([204, null]);
    expect((await send(at("evt_0", "2026-11-21T09:00:00Z"))).headers.get("webhook-stale")).toBe("true");
    expect(seen.map((event) => event.id)).toEqual(["evt_1"]);
  });

  it("prunes positions with the handled ids' retention", async () => {
    const inbox = new SqliteInbox(db, { scope: "order-prune", order: true, retention: 1 });
    await inbox.migrate();
    await inbox.handle(() => {})(createEvent("flag.updated"));
    const count = () =>
      db.prepare("select count(*) as n from flag_webhooks_inbox_positions where scope = 'order-prune'").get();
    expect(count()).toEqual({ n: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await inbox.prune();
    expect(count()).toEqual({ n: 0 });
  });

  it("keeps positions within the retention: prune() leaves a flag's row that has not expired", async () => {
    const inbox = new SqliteInbox(db, { scope: "order-kept", order: true, retention: "1h" });
    await inbox.migrate();
    await inbox.handle(() => {})(createEvent("flag.updated"));
    await inbox.prune();
    const count = db.prepare("select count(*) as n from flag_webhooks_inbox_positions where scope = 'order-kept'");
    expect(count.get()).toEqual({ n: 1 });
  });
});
