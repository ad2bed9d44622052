import { setTimeout as sleep } from "node:timers/promises";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorker } from "../../support/cloudflare-bundle.js";
import { signatureOf } from "../../support/deliveries.js";

// Attack: DurableObjectOrderStore inside a Worker, as deployed (test/fixtures/cloudflare/
// order-worker.ts in workerd), where an invocation that has answered ends, and its subrequests
// with it. A delivery that finds its flag held waits inside the OrderObject; when it gives up
// (`order.timeout`, 1 s here, 10 s by default) it answers 503 and its Worker is gone, but its hold
// request stays waiting in the object, and takes the flag, for nobody, as soon as the holder ends.
// Nobody releases it: the flag is held for a whole lease (60 s by default), every delivery of it
// meanwhile waits, gives up with 503, and leaves one more such waiter, which takes the flag for a
// lease in its turn. Measured: after one handler of 2.5 s and one delivery that gave up, every
// delivery of the flag sent one after another was answered 503 for as long as it was tried (110
// deliveries over 115 s); with one such waiter and nothing sent after it, the flag was free
// again after 61 s. In Node (test/stores/order/durable-object.test.ts) the receiver
// releases a hold that comes late, which a finished Worker cannot.
// Fixed: the hold request carries how long its caller waits (the receiver's order.timeout), and
// the object answers without taking the flag once that is past, so a hold is only taken for a
// caller still there.

const SECRET = "whsec-order-worker";
let mf: Miniflare;
beforeAll(async () => {
  mf = await startWorker("test/fixtures/cloudflare/order-worker.ts", {
    bindings: { WEBHOOK_SECRET: SECRET },
    durableObjects: { ORDER: "OrderObject" },
  });
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

/** Delivers a flag.updated of `flag` at 09:00:`second`, whose handler sleeps `sleepMs`, to the Worker. */
async function deliver(flag: string, id: string, second: number, sleepMs = 0) {
  const body = JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date(Date.UTC(2026, 10, 21, 9, 0, second)).toISOString(),
    environment: "production",
    data: {
      flag,
      changes: [{ path: "on", from: false, to: true }],
      actor: { type: "user", email: "a@b.c" },
      sleep: sleepMs,
    },
  });
  return mf.dispatchFetch("http://worker/", {
    method: "POST",
    headers: { "content-type": "application/json", "service-signature": await signatureOf(SECRET, body) },
    body,
  });
}

describe("DurableObjectOrderStore in a Worker: a delivery that gave up waiting for its flag", () => {
  it("leaves the flag free once the holder ends: the next delivery is handled (it was 503: the abandoned wait took the flag for its lease)", async () => {
    const slow = deliver("checkout", "evt_a", 1, 2500);
    await sleep(200);
    expect((await deliver("checkout", "evt_b", 2)).status).toBe(503);
    expect((await slow).status).toBe(204);
    expect((await deliver("checkout", "evt_c", 3)).status).toBe(204);
  }, 30_000);
});
