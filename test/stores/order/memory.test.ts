import fc from "fast-check";
import { type KnownWebhookEvent, MemoryOrderStore, type WebhookEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { checkHistory, histories, propertyRuns } from "../../support/order.js";
import { SECRET } from "../../support/receiver.js";

/** A fetch receiver ordering on `store`, whose handler writes down what it saw (after a turn of the event loop). */
function receiver(store: MemoryOrderStore) {
  const seen: WebhookEvent[] = [];
  const handle = webhookHandler({
    secret: SECRET,
    order: { store },
    onError: (error) => {
      throw error;
    },
    onEvent: async (event) => {
      await new Promise((resolve) => setImmediate(resolve));
      seen.push(event);
    },
  });
  const send = async (event: KnownWebhookEvent) => handle(await signedRequest({ secret: SECRET, event }));
  return { seen, send };
}

describe("MemoryOrderStore", () => {
  it("gives the in-order state for any history delivered shuffled, with copies, all at once (1,000 runs)", async () => {
    await fc.assert(
      fc.asyncProperty(histories(12), async (history) => {
        await checkHistory(history, async (delivered) => {
          const { seen, send } = receiver(new MemoryOrderStore());
          const answers = await Promise.all(delivered.map(send));
          expect(answers.map((answer) => answer.status).every((status) => status === 204)).toBe(true);
          return seen;
        });
      }),
      { numRuns: propertyRuns(1000) },
    );
  }, 120_000);

  it("lets one delivery of a flag run at a time, and the next take the flag once it is decided", async () => {
    const store = new MemoryOrderStore();
    const first = await store.hold("alpha", 60_000);
    let second = false;
    const next = Promise.resolve(store.hold("alpha", 60_000)).then((hold) => {
      second = true;
      return hold;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(second).toBe(false);
    await first.commit({ fields: { a: "x" } });
    expect((await next).positions).toEqual({ fields: { a: "x" } });
  });

  it("lets a hold whose lease ran out be taken over, and refuses the late commit", async () => {
    let now = 1_000;
    const store = new MemoryOrderStore({ now: () => now });
    const first = await store.hold("alpha", 100);
    now += 101;
    const second = await store.hold("alpha", 100);
    await expect(first.commit({ fields: { a: "late" } })).rejects.toThrow(/ran out/);
    expect(second.positions).toBeUndefined();
  });

  it("forgets a flag's positions after the retention", async () => {
    let now = 1_000;
    const store = new MemoryOrderStore({ now: () => now, retention: 500 });
    await (await store.hold("alpha", 100)).commit({ fields: { a: "x" } });
    now += 499;
    const kept = await store.hold("alpha", 100);
    expect(kept.positions).toEqual({ fields: { a: "x" } });
    await kept.release();
    now += 1;
    expect((await store.hold("alpha", 100)).positions).toBeUndefined();
  });
});
