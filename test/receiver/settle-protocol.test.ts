import Database from "better-sqlite3";
import { MemoryDedupeStore, SIGNATURE_HEADER, WebhookError, type WebhookEvent } from "flag-webhooks";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import { afterEach, describe, expect, it } from "vitest";
import type { Accepted, Answer, Delivery } from "../../src/receiver/protocol.js";
import { createReceiver } from "../../src/receiver/receiver.js";
import { recordingStore, recordingTelemetry } from "../support/receiver.js";
import { databaseFile } from "../support/sqlite.js";

// The settlement as an adapter drives it, through the adapter protocol (createReceiver and its
// hooks, as src/adapters/ use them): the handler's end and the final answer reported in either
// order, twice, late, and a client that left. Each first call counts and nothing is decided
// twice; a second report must never turn a handled delivery into a released one (its retry would
// run the handler again) or end its record twice. Real stores: a MemoryDedupeStore, SqliteInboxes
// on files.

const SECRET = "whsec-settle-protocol";

/** A delivery of `event` as an adapter hands it to the receiver: method, signature, the exact bytes. */
async function deliveryOf(event: WebhookEvent): Promise<Delivery> {
  const signed = await signedDelivery({ secret: SECRET, event });
  return { method: "POST", signature: signed.headers[SIGNATURE_HEADER], body: () => signed.body };
}

/** A receiver with a memory dedupe store and telemetry, driven by hand: what the accept path gives an adapter. */
function dedupeReceiver() {
  const store = recordingStore(new MemoryDedupeStore());
  const { log, telemetry } = recordingTelemetry();
  const receiver = createReceiver<[]>({ secret: SECRET, telemetry, dedupe: { store, ttl: "1h" }, onError: () => {} });
  const event = createEvent("flag.updated");
  /** Accepts (a copy of) the event: the settlement, or the answer given instead. */
  const accept = async () => receiver.accept(await deliveryOf(event));
  return { store, log, accept };
}

/** The settlement of an accepted delivery (the test fails when the receiver answered instead). */
function accepted(value: Accepted | Answer): Accepted {
  if (!("event" in value)) throw new Error(`answered ${value.status} instead of accepting`);
  return value;
}

/** What a copy of the event gets once the first delivery was settled: a duplicate 204, or accepted again. */
async function copyOf(accept: () => Promise<Accepted | Answer>): Promise<string> {
  const copy = await accept();
  return "event" in copy ? "accepted again" : `${copy.status} duplicate:${copy.headers["webhook-duplicate"]}`;
}

describe("each report counts once", () => {
  it("finished() twice: the first counts; a throw reported after a clean end does not release the handled event", async () => {
    const { store, log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    delivery.finished();
    delivery.finished(new Error("reported late"));
    expect(delivery.answered(204)).toBeUndefined();
    expect(store.calls).toEqual(["claim 60000", "complete 3600000"]);
    expect(log.filter((line) => line !== "verified" && !line.startsWith("store"))).toEqual([
      "handler",
      "end handled 204",
    ]);
    expect(await copyOf(accept)).toBe("204 duplicate:true");
  });

  it("finished() after the decision: nothing changes, and an answer reported again is given the same decision", async () => {
    const { store, log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    // The answer first (a response-timeout layer's), then the handler's end: decided then.
    const verdict = delivery.answered(200);
    expect(verdict).toBeInstanceOf(Promise);
    delivery.finished();
    expect(await verdict).toBeUndefined();
    delivery.finished(new Error("reported after the decision"));
    expect(delivery.answered(500)).toBe(verdict);
    await settledTurn();
    expect(store.calls).toEqual(["claim 60000", "complete 3600000"]);
    expect(log.filter((line) => line.startsWith("end") || line === "handler")).toEqual(["handler", "end handled 200"]);
    expect(await copyOf(accept)).toBe("204 duplicate:true");
  });

  it("answered() twice while the handler runs: one decision, on the first status, given to both", async () => {
    const { store, log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    const first = delivery.answered(200);
    const second = delivery.answered(503);
    expect(second).toBe(first);
    delivery.finished();
    expect(await first).toBeUndefined();
    expect(store.calls).toEqual(["claim 60000", "complete 3600000"]);
    expect(log.filter((line) => line.startsWith("end"))).toEqual(["end handled 200"]);
  });

  it("a handler that threw after its 2xx answer began: the error's answer in its place, the claim released, the retry runs", async () => {
    const { store, log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    const verdict = delivery.answered(200);
    delivery.finished(new TypeError("failed after answering"));
    expect(await verdict).toMatchObject({ status: 500 });
    expect(store.calls).toEqual(["claim 60000", "release"]);
    expect(log.filter((line) => line.startsWith("end"))).toEqual(["end handler_error 500"]);
    expect(await copyOf(accept)).toBe("accepted again");
  });
});

describe("a delivery not handled: how its record ends, and the answer put in place of a 2xx", () => {
  const storeDown = () => new WebhookError("store_unavailable", "the queue is down; retry later");
  it.each([
    ["no throw, a 404", undefined, 404, "end handler_error 404", undefined],
    ["no throw, no answer (cut)", undefined, undefined, "end handler_error undefined", undefined],
    ["a throw, no answer (cut)", new TypeError("failed"), undefined, "end handler_error 500", undefined],
    ["a WebhookError, no answer (cut)", storeDown(), undefined, "end store_unavailable 503", undefined],
    ["a throw, answered 500", new TypeError("failed"), 500, "end handler_error 500", undefined],
    ["a WebhookError, answered 502", storeDown(), 502, "end store_unavailable 502", undefined],
    ["a WebhookError, answered 200", storeDown(), 200, "end store_unavailable 503", 503],
    ["a throw, answered 204", new TypeError("failed"), 204, "end handler_error 500", 500],
  ])("%s: %s; released", async (_case, thrown, status, end, instead) => {
    const { store, log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    delivery.finished(thrown);
    const verdict = await delivery.answered(status);
    expect(verdict?.status).toBe(instead);
    if (thrown instanceof WebhookError && verdict) {
      expect([verdict.headers["retry-after"], JSON.parse(verdict.body ?? "")]).toEqual([
        "10",
        { error: { code: "store_unavailable", message: "the queue is down; retry later" } },
      ]);
    }
    expect(log.filter((line) => line.startsWith("end"))).toEqual([end]);
    expect(store.calls).toEqual(["claim 60000", "release"]);
  });
});

describe("the delivery's record and a store that marks ids done later", () => {
  it("the handler runs in the record's context, and its duration is the handler's own", async () => {
    const seen: { inside: boolean; seconds: number[] } = { inside: false, seconds: [] };
    let depth = 0;
    const receiver = createReceiver<[]>({
      secret: SECRET,
      telemetry: {
        delivery: () => ({
          verified() {},
          store() {},
          run(handler) {
            depth++;
            try {
              return handler();
            } finally {
              depth--;
            }
          },
          handler: (seconds) => void seen.seconds.push(seconds),
          end() {},
        }),
      },
    });
    const before = performance.now();
    const delivery = accepted(await receiver.accept(await deliveryOf(createEvent("flag.updated"))));
    seen.inside = delivery.run(() => depth === 1);
    delivery.finished();
    const elapsed = (performance.now() - before) / 1000;
    expect(seen.inside).toBe(true);
    expect(seen.seconds).toHaveLength(1);
    // Measured from the delivery's acceptance: no longer than the test's own span around it.
    expect(seen.seconds[0]).toBeGreaterThanOrEqual(0);
    expect(seen.seconds[0]).toBeLessThanOrEqual(elapsed);
  });

  it("a claim on a store that answers later (a SqliteInbox as DedupeStore): the 2xx waits for the id marked done", async () => {
    const { inbox } = await sqliteInbox();
    const { log, telemetry } = recordingTelemetry();
    const receiver = createReceiver<[]>({ secret: SECRET, telemetry, dedupe: { store: inbox, ttl: "1h" } });
    const event = createEvent("flag.updated");
    const delivery = accepted(await receiver.accept(await deliveryOf(event)));
    expect(delivery.holdsAnswer()).toBe(true);
    delivery.finished();
    const verdict = delivery.answered(204);
    expect(verdict).toBeInstanceOf(Promise);
    expect(log.filter((line) => line.startsWith("end"))).toEqual([]);
    expect(await verdict).toBeUndefined();
    expect(log.filter((line) => line.startsWith("end"))).toEqual(["end handled 204"]);
    expect(await inbox.claim(event.id, 60_000)).toBe("done");
  });
});

describe("a client that closed before any answer (clientClosed)", () => {
  it("ends the record once, client_closed; the claim still waits for the handler, and is marked done when it answers 2xx", async () => {
    const { store, log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    delivery.clientClosed();
    delivery.clientClosed();
    expect(log.filter((line) => line.startsWith("end"))).toEqual(["end client_closed undefined"]);
    expect(await copyOf(accept)).toBe("409 duplicate:undefined");
    delivery.finished();
    expect(await delivery.answered(204)).toBeUndefined();
    expect(store.calls.at(-1)).toBe("complete 3600000");
    // The copy's own record, and no second end of the first delivery's.
    expect(log.filter((line) => line.startsWith("end"))).toEqual([
      "end client_closed undefined",
      "end delivery_in_progress 409",
    ]);
    expect(await copyOf(accept)).toBe("204 duplicate:true");
  });

  it("after the decision: the record has ended as decided, and stays so", async () => {
    const { log, accept } = dedupeReceiver();
    const delivery = accepted(await accept());
    delivery.finished();
    delivery.answered(204);
    delivery.clientClosed();
    expect(log.filter((line) => line.startsWith("end"))).toEqual(["end handled 204"]);
  });
});

describe("holdsAnswer(): whether a 2xx must wait for the decision", () => {
  it("a claim alone holds it; nothing to record does not", async () => {
    const { accept } = dedupeReceiver();
    expect(accepted(await accept()).holdsAnswer()).toBe(true);
    const { telemetry } = recordingTelemetry();
    const bare = createReceiver<[]>({ secret: SECRET, telemetry });
    expect(accepted(await bare.accept(await deliveryOf(createEvent("flag.updated")))).holdsAnswer()).toBe(false);
  });

  it("an inbox's transaction enlisted, with no claim, holds it", async () => {
    const { inbox } = await sqliteInbox();
    const seen: boolean[] = [];
    let delivery: Accepted | undefined;
    const receiver = createReceiver<[]>(
      {
        secret: SECRET,
        onEvent: inbox.handle(() => {
          seen.push(delivery?.holdsAnswer() === true);
        }),
      },
      {
        watch(watched) {
          delivery = watched;
          seen.push(watched.holdsAnswer());
          return true;
        },
      },
    );
    await receiver.handle(await deliveryOf(createEvent("flag.updated")));
    // Watched before the inbox's run began (nothing enlisted yet), then enlisted while its handler runs.
    expect(seen).toEqual([false, true]);
    delivery?.finished();
    expect(await delivery?.answered(204)).toBeUndefined();
  });
});

describe("an inbox that enlists once the final answer is known", () => {
  it("is not part of the decision: it commits when its handler resolves, whatever that answer (a response-timeout layer's 503)", async () => {
    const { handle, committed, db } = await sqliteInbox();
    const { telemetry } = recordingTelemetry();
    let delivery: Accepted | undefined;
    let verdict: ReturnType<Accepted["answered"]> | undefined;
    const receiver = createReceiver<[]>(
      {
        secret: SECRET,
        telemetry,
        onEvent: async (event) => {
          // The layer answered 503 while the handler ran; the handler goes on, and runs the inbox.
          verdict = delivery?.answered(503);
          await handle(event);
        },
      },
      {
        watch(watched) {
          delivery = watched;
          return true;
        },
      },
    );
    await receiver.handle(await deliveryOf(createEvent("flag.updated")));
    expect(await verdict).toBeUndefined();
    // Enlisted, it would have been rolled back with the 503, its handler's work lost for a sender that
    // will retry into an id the inbox never recorded: committed alone, the retry is its duplicate.
    expect([committed(), db.inTransaction]).toEqual([1, false]);
  });
});

const dbs: Database.Database[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
});

/** A SqliteInbox on a new WAL file with an effects table, and what a second connection sees committed. */
async function sqliteInbox() {
  const file = databaseFile();
  const db = new Database(file);
  db.pragma("journal_mode = wal");
  db.exec("create table effects (event_id text not null)");
  const reader = new Database(file, { readonly: true });
  dbs.push(db, reader);
  const inbox = new SqliteInbox(db, { scope: "settle-protocol", timeout: "2s" });
  await inbox.migrate();
  const committed = () => (reader.prepare("select count(*) as n from effects").get() as { n: number }).n;
  const handle = inbox.handle((event, tx) => {
    tx.prepare("insert into effects (event_id) values (?)").run(event.id);
  });
  return { db, inbox, handle, committed };
}

/** A turn of the event loop: what a decision started meanwhile has done by then. */
const settledTurn = () => new Promise((resolve) => setImmediate(resolve));
