import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { type KnownWebhookEvent, STALE_HEADER, type WebhookEvent } from "flag-webhooks";
import { DynamoDBDedupeStore, DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { countedClient } from "../../support/dynalite.js";
import { useDynamoDBLocal } from "../../support/dynamodb-local.js";
import { assertHistoriesAtOnce, checkHistory } from "../../support/order.js";
import { SECRET } from "../../support/receiver.js";
import { describeStoreContract } from "../../support/store-contract.js";

// Ordered delivery on AWS's own DynamoDB Local, which has what dynalite lacks: TransactWriteItems.
// With a DynamoDBDedupeStore on the same client and table, a delivery ends in one transaction (the
// id's done mark and the flag's commit, on the condition that the hold is still the delivery's):
// counted here on the real SDK, with the cases where the transaction's all-or-nothing matters.

const { availability, local } = useDynamoDBLocal();
const newScope = () => `tx-${randomUUID().slice(0, 8)}`;

/** A client that records the name of every command it sends. */
function countingClient(): { client: DynamoDBClient; sent: string[] } {
  const { client, names } = countedClient(local());
  return { client, sent: names };
}

/** A receiver with dedupe (and `order`, unless false) on one client and table, and what its handler saw. */
function receiver(
  client: DynamoDBClient,
  scope: string,
  options: { order?: boolean; lease?: string; onEvent?: (event: WebhookEvent) => unknown; seen?: WebhookEvent[] } = {},
) {
  const { table } = local();
  const events = options.seen ?? [];
  const seen: string[] = [];
  const handle = webhookHandler({
    secret: SECRET,
    // Bounds long enough for a loaded machine: what is under test is what each answer is, not how fast.
    dedupe: { store: new DynamoDBDedupeStore(client, { table, scope, timeout: "30s" }), ttl: "1h", timeout: "30s" },
    ...(options.order !== false && {
      order: {
        store: new DynamoDBOrderStore(client, { table, scope, timeout: "30s" }),
        timeout: "60s",
        ...(options.lease && { lease: options.lease }),
      },
    }),
    onEvent: async (event) => {
      seen.push(event.id);
      await options.onEvent?.(event);
      // After a turn of the event loop, so that deliveries of one flag would overlap if nothing held it.
      await new Promise((resolve) => setImmediate(resolve));
      events.push(event);
    },
  });
  const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
  return { send, seen };
}

const update = (n: number, flag = `flag-${n}`, id = `evt_${randomUUID()}`) =>
  createEvent("flag.updated", {
    id,
    createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, n)).toISOString(),
    data: { flag, changes: [{ path: "on", from: false, to: n % 2 === 0 }] },
  }) as KnownWebhookEvent;

/** The state DynamoDB keeps for an event id of `scope`: "claimed", "done", or undefined when there is none. */
async function idState(scope: string, id: string): Promise<string | undefined> {
  return ((await local().item(`${scope}#${id}`)) as { state?: { S?: string } } | undefined)?.state?.S;
}

describe.skipIf(!availability.available)("DynamoDBOrderStore with DynamoDBDedupeStore on DynamoDB Local", () => {
  it("costs 3 requests a delivery against dedupe's 2: the claim, the hold, then one TransactWriteItems (done mark and commit), on new flags and on one flag alike", async () => {
    const plain = countingClient();
    const alone = receiver(plain.client, newScope(), { order: false });
    for (let n = 0; n < 5; n++) expect((await alone.send(update(n))).status).toBe(204);
    expect(plain.sent.length / 5).toBe(2);

    for (const oneFlag of [false, true]) {
      const { client, sent } = countingClient();
      const ordered = receiver(client, newScope());
      for (let n = 0; n < 5; n++)
        expect((await ordered.send(update(n, oneFlag ? "checkout" : undefined))).status).toBe(204);
      expect(sent.length / 5).toBe(3);
      expect(sent.slice(0, 3)).toEqual(["PutItem", "UpdateItem", "TransactWriteItems"]);
    }
  });

  it("marks the id done and writes the positions in that one transaction; a wholly stale event costs 3 too", async () => {
    const scope = newScope();
    const { client, sent } = countingClient();
    const { send, seen } = receiver(client, scope);
    const fresh = update(2, "dark-mode");
    expect((await send(fresh)).status).toBe(204);
    expect(await idState(scope, fresh.id)).toBe("done");
    const item = (await local().item(`order:${scope}#dark-mode`)) as { positions?: { S?: string }; holder?: unknown };
    expect(item.holder).toBeUndefined();
    expect(item.positions?.S).toContain(fresh.id);
    sent.splice(0);
    const late = update(1, "dark-mode");
    const answer = await send(late);
    expect(answer.headers.get(STALE_HEADER)).toBe("true");
    expect(sent).toEqual(["PutItem", "UpdateItem", "TransactWriteItems"]);
    expect(await idState(scope, late.id)).toBe("done");
    expect(seen).toEqual([fresh.id]);
  });

  it("a copy of a handled event costs its one claim (and a read, as this 2020 DynamoDB Local returns no item with a failed condition) and runs nothing", async () => {
    const { client, sent } = countingClient();
    const { send, seen } = receiver(client, newScope());
    const event = update(3);
    expect((await send(event)).status).toBe(204);
    sent.splice(0);
    expect((await send(event)).status).toBe(204);
    expect(sent).toEqual(["PutItem", "GetItem"]);
    expect(seen).toEqual([event.id]);
  });

  it("a failed handler costs 3 requests too (the release of the hold and of the claim in one transaction), and its retry runs the event, positions untouched", async () => {
    const scope = newScope();
    const { client, sent } = countingClient();
    let fail = true;
    const { send, seen } = receiver(client, scope, {
      onEvent: () => {
        if (fail) throw new Error("the mirror is down");
      },
    });
    const event = update(4, "dark-mode");
    expect((await send(event)).status).toBe(500);
    expect(sent).toEqual(["PutItem", "UpdateItem", "TransactWriteItems"]);
    expect(await idState(scope, event.id)).toBeUndefined();
    const item = (await local().item(`order:${scope}#dark-mode`)) as { positions?: unknown; holder?: unknown };
    expect(item.holder).toBeUndefined();
    expect(item.positions).toBeUndefined();
    fail = false;
    expect((await send(event)).status).toBe(204);
    expect(seen).toEqual([event.id, event.id]);
    expect(await idState(scope, event.id)).toBe("done");
  });

  it("refuses the late commit of a hold that ran out, and the done mark with it: the event is not marked done and its retry runs it again", async () => {
    const scope = newScope();
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let first = true;
    const { send, seen } = receiver(local().client(), scope, {
      lease: "300ms",
      onEvent: async () => {
        if (!first) return;
        first = false;
        started();
        await gate;
      },
    });
    const event = update(5, "dark-mode");
    const answer = send(event);
    await running;
    // Another instance waits out the lease on its own clock, takes the flag over and commits.
    const other = new DynamoDBOrderStore(local().client(), { table: local().table, scope, timeout: "30s" });
    const taken = await other.hold("dark-mode", 60_000);
    await taken.commit({ fields: {} });
    open();
    expect((await answer).status).toBe(503);
    expect(await idState(scope, event.id)).not.toBe("done");
    expect((await send(event)).status).toBe(204);
    expect(seen).toEqual([event.id, event.id]);
    expect(await idState(scope, event.id)).toBe("done");
  });

  it("gives the in-order state for any history delivered shuffled, with copies, all at once to two instances each with dedupe and order on one client (200 runs of up to 5 events)", async () => {
    const clients = [local().client(), local().client()];
    await assertHistoriesAtOnce(200, 5, async (history) => {
      const scope = newScope();
      const seen: WebhookEvent[] = [];
      const instances = clients.map((client) => receiver(client, scope, { seen }));
      await checkHistory(history, async (delivered) => {
        // A copy that arrives while the first runs is answered 409 and sent again a moment later,
        // as a sender retries (at once, the copies' claims would be most of the run's requests).
        const sendUntilDone = async (event: KnownWebhookEvent, i: number): Promise<number> => {
          const { status } = await (instances[i % 2] as (typeof instances)[number]).send(event);
          if (status !== 409) return status;
          await new Promise((resolve) => setTimeout(resolve, 50));
          return sendUntilDone(event, i);
        };
        expect(await Promise.all(delivered.map(sendUntilDone))).toEqual(delivered.map(() => 204));
        return seen;
      });
    });
  }, 120_000);
});

describeStoreContract(
  "DynamoDBDedupeStore on DynamoDB Local",
  {
    ...(!availability.available && { skip: availability.reason }),
    shared: true,
    scoped: true,
    async make() {
      const { table } = local();
      const store = (scope: string) => new DynamoDBDedupeStore(local().client(), { table, scope, timeout: "30s" });
      const scope = newScope();
      return { store: store(scope), peer: store(scope), otherScope: store(newScope()) };
    },
  },
  () => {},
);
