import Database from "better-sqlite3";
import type { Telemetry, WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";
import { databaseFile } from "../support/sqlite.js";

// How a store takes part in a delivery (src/store-contract/enlist.ts), seen from the receiver:
// an inbox's own handler is known when the receiver is made, an inbox called inside onEvent finds
// the delivery in the process-wide registry only while the handler runs, and a store's duplicate
// answer is told from any other reply.

const SECRET = "whsec-enlist";

/** The process-wide registry of deliveries whose handler runs (one per process, by its symbol). */
const registry = (globalThis as { [key: symbol]: Map<WebhookEvent, unknown> | undefined })[
  Symbol.for("flag-webhooks.deliveries")
];

const dbs: Database.Database[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
});

async function sqliteInbox(retention?: string) {
  const db = new Database(databaseFile());
  dbs.push(db);
  const inbox = new SqliteInbox(db, { scope: "enlist", ...(retention ? { retention } : {}) });
  await inbox.migrate();
  return inbox;
}

describe("the registry of deliveries being handled", () => {
  it.each([
    ["returns", () => "value", 204],
    [
      "throws",
      () => {
        throw new Error("sync failure");
      },
      500,
    ],
    ["resolves", async () => "value", 204],
    [
      "rejects",
      async () => {
        throw new Error("async failure");
      },
      500,
    ],
  ])("holds a delivery while onEvent runs, and forgets it once onEvent %s", async (_case, outcome, status) => {
    expect(registry).toBeInstanceOf(Map);
    const during: boolean[] = [];
    const receive = webhookHandler({
      secret: SECRET,
      onError: () => {},
      onEvent: (event) => {
        during.push(registry?.has(event) === true);
        return outcome();
      },
    });
    const answer = await receive(await signedRequest({ secret: SECRET, event: createEvent("flag.updated") }));
    // What onEvent threw still reaches the receiver through the registry's hands.
    expect([during, answer.status]).toEqual([[true], status]);
    // Kept, every delivery's event would stay in memory for as long as the process runs.
    expect(registry?.size).toBe(0);
  });
});

describe("an inbox's own handler as onEvent", () => {
  it("is known when the receiver is made: a retention shorter than maxAge allows is refused then", async () => {
    const inbox = await sqliteInbox("30m");
    expect(() => webhookHandler({ secret: SECRET, maxAge: "1h", onEvent: inbox.handle(() => {}) })).toThrow(
      /^flag-webhooks: the inbox's retention \(1800000 ms\) is shorter than maxAge/,
    );
    // The same handler inside the app's own onEvent is checked only when it enlists.
    const handle = inbox.handle(() => {});
    expect(() =>
      webhookHandler({ secret: SECRET, maxAge: "1h", onEvent: (event: WebhookEvent) => handle(event) }),
    ).not.toThrow();
  });
});

describe("a store's duplicate answer, told from other replies", () => {
  /** The outcomes a fetch receiver records for one delivery whose onEvent returns `value`. */
  async function outcomeOf(value: unknown): Promise<{ status: number; outcomes: string[] }> {
    const outcomes: string[] = [];
    const telemetry: Telemetry = {
      delivery: () => ({
        verified() {},
        store() {},
        run: (handler) => handler(),
        handler() {},
        end: (outcome) => void outcomes.push(outcome),
      }),
    };
    const receive = webhookHandler({ secret: SECRET, telemetry, onEvent: () => value as undefined });
    const answer = await receive(await signedRequest({ secret: SECRET, event: createEvent("flag.updated") }));
    return { status: answer.status, outcomes };
  }

  it.each([
    ["null", null, 204],
    ["a reply of its own", { status: 202 }, 202],
    [
      "a reply with the duplicate header, not the store's",
      { status: 204, headers: { "webhook-duplicate": "true" } },
      204,
    ],
  ])("onEvent returns %s: handled", async (_case, value, status) => {
    expect(await outcomeOf(value)).toEqual({ status, outcomes: ["handled"] });
  });

  it("an inbox's copy of a handled event: a duplicate", async () => {
    const inbox = await sqliteInbox();
    const receive = webhookHandler({ secret: SECRET, onEvent: inbox.handle(() => {}) });
    const event = createEvent("flag.updated");
    await receive(await signedRequest({ secret: SECRET, event }));
    const outcomes: string[] = [];
    const recorded = webhookHandler({
      secret: SECRET,
      telemetry: {
        delivery: () => ({
          verified() {},
          store() {},
          run: (handler) => handler(),
          handler() {},
          end: (outcome) => void outcomes.push(outcome),
        }),
      },
      onEvent: inbox.handle(() => {}),
    });
    const copy = await recorded(await signedRequest({ secret: SECRET, event }));
    expect([copy.status, copy.headers.get("webhook-duplicate"), outcomes]).toEqual([204, "true", ["duplicate"]]);
  });
});
