import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { KnownWebhookEvent } from "flag-webhooks";
import { DynamoDBDedupeStore, DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { useDynamoDBLocal } from "../../support/dynamodb-local.js";
import { SECRET } from "../../support/receiver.js";

// Attack on DynamoDBOrderStore's transactions (a delivery with DynamoDBDedupeStore on the same
// client and table ends in one TransactWriteItems: the commit or release of its flag's hold with
// the done mark or release of its id), on AWS's DynamoDB Local: a transaction that fails other
// than by a condition, and copies at once.

const { availability, local } = useDynamoDBLocal();
const newScope = () => `atk-${randomUUID().slice(0, 8)}`;

/** How DynamoDB refused a TransactWriteItems: a throttle the SDK gave up on, or a cancellation of these reasons. */
type Refusal = { throttle: true } | { reasons: string[] };

/**
 * A client whose TransactWriteItems, once armed, are refused `times` times in a row as `refusal`
 * says, before reaching DynamoDB Local (what DynamoDB answers under a throttle, or while other
 * requests write the same items).
 */
function failingOnce(refusal: Refusal = { throttle: true }, times = 1) {
  const client = local().client();
  let left = 0;
  let failed = 0;
  client.middlewareStack.add(
    (next, context) => (args) => {
      if (left > 0 && context.commandName === "TransactWriteItemsCommand") {
        left--;
        failed++;
        if ("throttle" in refusal) {
          throw Object.assign(new Error("Rate of requests exceeds the allowed throughput."), {
            name: "ThrottlingException",
          });
        }
        throw Object.assign(new Error(`Transaction cancelled [${refusal.reasons.join(", ")}]`), {
          name: "TransactionCanceledException",
          CancellationReasons: refusal.reasons.map((Code) => ({ Code })),
        });
      }
      return next(args);
    },
    { step: "initialize" },
  );
  return {
    client,
    arm: () => {
      left = times;
    },
    failed: () => failed,
  };
}

function receiver(
  client: DynamoDBClient,
  scope: string,
  onEvent: (event: KnownWebhookEvent) => unknown,
  { inFlightTtl = "60s", orderTimeout = "2s" } = {},
) {
  const { table } = local();
  const handle = webhookHandler({
    secret: SECRET,
    dedupe: {
      store: new DynamoDBDedupeStore(client, { table, scope, timeout: "30s" }),
      ttl: "1h",
      timeout: "30s",
      inFlightTtl,
    },
    order: {
      store: new DynamoDBOrderStore(client, { table, scope, timeout: "30s" }),
      timeout: orderTimeout,
      lease: "60s",
    },
    onEvent: onEvent as never,
  });
  return async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
}
const update = (n: number, flag: string, id = `evt_${randomUUID()}`) =>
  createEvent("flag.updated", {
    id,
    createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, n)).toISOString(),
    data: { flag, changes: [{ path: "on", from: false, to: n % 2 === 0 }] },
  }) as KnownWebhookEvent;
const holderOf = async (scope: string, flag: string) =>
  ((await local().item(`order:${scope}#${flag}`)) as { holder?: { S?: string } } | undefined)?.holder?.S;

describe.skipIf(!availability.available)("DynamoDBOrderStore's transactions on DynamoDB Local", () => {
  // Was broken, 1 of 1: a handler fails, and the one TransactWriteItems that would end its hold
  // and free its claim fails (a throttle the SDK gave up on: its retries spent). release()
  // swallowed the error and left both: the flag's next delivery waited for the hold and was
  // answered 503 at the order timeout (2 s here), as every delivery of the flag was until the
  // hold's lease (60 s) ran out; and the failed event's retry was 409 until its claim's lease
  // ended. Now each is ended alone, as a failed commit does.
  it("a failed handler whose release transaction fails: the hold is ended all the same", async () => {
    const scope = newScope();
    const { client, arm, failed } = failingOnce();
    let fail = true;
    const send = receiver(client, scope, () => {
      if (fail) {
        arm();
        throw new Error("the mirror is down");
      }
    });
    const event = update(1, "dark-mode");
    expect((await send(event)).status).toBe(500);
    expect(failed()).toBe(1);
    const holder = await holderOf(scope, "dark-mode");
    fail = false;
    const next = (await send(update(2, "dark-mode"))).status;
    const retry = (await send(event)).status;
    expect({ holder, next, retry }).toEqual({ holder: undefined, next: 204, retry: 204 });
  });

  // Was broken, 1 of 1, the same gap by another way: the release transaction cancelled three
  // times in a row for a conflict on the flag's item (DynamoDB's TransactionConflict: the waiting
  // deliveries' conditional looks at the same item) with the claim's part "None". release()
  // ended the hold alone only when the hold's reason was "None", so a conflict left it, and the
  // flag's next delivery was 503 at the order timeout. Now the hold is ended alone for any reason
  // but a failed condition (a conflict wrote nothing).
  it("a release cancelled by conflicts on the flag's item: the hold is ended all the same", async () => {
    const scope = newScope();
    const { client, arm, failed } = failingOnce({ reasons: ["TransactionConflict", "None"] }, 3);
    let fail = true;
    const send = receiver(client, scope, () => {
      if (fail) {
        arm();
        throw new Error("the mirror is down");
      }
    });
    expect((await send(update(1, "dark-mode"))).status).toBe(500);
    expect(failed()).toBe(3);
    const holder = await holderOf(scope, "dark-mode");
    fail = false;
    const next = (await send(update(2, "dark-mode"))).status;
    expect({ holder, next }).toEqual({ holder: undefined, next: 204 });
  });

  it.each([
    ["a throttle", { throttle: true } as Refusal, 1],
    ["three conflicts", { reasons: ["TransactionConflict", "None"] } as Refusal, 3],
  ])(
    "held: a commit transaction refused by %s ends its hold alone: the flag's next delivery 204",
    async (_name, refusal, times) => {
      const scope = newScope();
      const { client, arm, failed } = failingOnce(refusal, times);
      let first = true;
      const send = receiver(client, scope, () => {
        if (first) {
          first = false;
          arm();
        }
      });
      const event = update(1, "dark-mode");
      expect((await send(event)).status).toBe(503);
      expect(failed()).toBe(times);
      expect(await holderOf(scope, "dark-mode")).toBeUndefined();
      expect((await send(update(2, "dark-mode"))).status).toBe(204);
    },
  );

  // Held: 8 copies of one event and 4 other events of the same flag, all at once: each id's
  // handler ran at most once (the copied one, the newest, once), each copy was answered 204 or 409
  // (a sender's retry of a 409 then 204), the hold was gone at the end and the flag's positions
  // name the newest event.
  it("held: copies at once beside other events of the flag: each handled once, no hold left", async () => {
    const scope = newScope();
    const seen: string[] = [];
    const send = receiver(local().client(), scope, async (event) => {
      seen.push(event.id);
      await new Promise((resolve) => setTimeout(resolve, 20));
    });
    const copied = update(9, "checkout");
    const others = [1, 2, 4, 5].map((n) => update(n, "checkout"));
    const statuses = await Promise.all(
      [...Array.from({ length: 8 }, () => copied), ...others].map(async (event) => (await send(event)).status),
    );
    for (const [i, status] of statuses.entries()) {
      if (status === 409) expect((await send(i < 8 ? copied : (others[i - 8] as KnownWebhookEvent))).status).toBe(204);
      else expect([204]).toContain(status);
    }
    expect(seen.filter((id) => id === copied.id).length).toBe(1);
    expect(new Set(seen).size).toBe(seen.length);
    expect(await holderOf(scope, "checkout")).toBeUndefined();
    const item = (await local().item(`order:${scope}#checkout`)) as { positions?: { S?: string } };
    expect(item.positions?.S).toContain(copied.id);
  });

  // A release cancelled by one of its two conditions: the handler ran past its claim's lease, a
  // copy took the claim over and waits for the flag; then the handler fails. The transaction is
  // cancelled (the claim is no longer this delivery's), and the hold must still end, alone, and
  // the copy's claim be left alone.
  it("held: a release cancelled because a copy took the claim over: the hold ends alone, the copy runs and is done", async () => {
    const scope = newScope();
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const seen: string[] = [];
    const send = receiver(
      local().client(),
      scope,
      async (event) => {
        seen.push(event.id);
        if (seen.length === 1) {
          await gate;
          throw new Error("the mirror is down");
        }
      },
      { inFlightTtl: "300ms", orderTimeout: "20s" },
    );
    const event = update(1, "dark-mode");
    const first = send(event);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const copy = send(event);
    await new Promise((resolve) => setTimeout(resolve, 300));
    open();
    const statuses = [(await first).status, (await copy).status];
    expect(statuses).toEqual([500, 204]);
    expect(seen).toEqual([event.id, event.id]);
    expect(await holderOf(scope, "dark-mode")).toBeUndefined();
    expect((await send(event)).status).toBe(204);
  });
});
