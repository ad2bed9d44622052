import { randomUUID } from "node:crypto";
import { type DedupeNamespace, DurableObjectDedupeStore } from "flag-webhooks/cloudflare";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleWorker, strykerMutantBanner } from "../support/cloudflare-bundle.js";

// A claim whose answer from the Durable Object was lost: the object stored it, and the request to
// it failed on the way back (the runtime's "Network connection lost", an object reset), so the
// store sees an error. The delivery is answered 503 and the sender retries; a caller that retries
// such a request itself (as Cloudflare advises for a retryable error) sends the same claim again.
// Either way the claim that landed is this delivery's own, and must not hold the id against the
// retry until the lease runs out (409 until inFlightTtl, 60 s by default). The real DedupeObject,
// in workerd through miniflare; the namespace in between loses the chosen answers.

let mf: Miniflare;
let real: DedupeNamespace;
beforeAll(async () => {
  mf = new Miniflare({
    modules: true,
    script: await bundleWorker("test/fixtures/cloudflare/objects.ts", strykerMutantBanner()),
    compatibilityDate: "2024-09-23",
    durableObjects: { DEDUPE: "TestDedupeObject", ODD: "OddObject" },
  });
  real = await mf.getDurableObjectNamespace("DEDUPE");
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

/**
 * The real namespace, except that the answer to the next claim of a key holding `lose` is lost
 * after the object handled it: thrown as the runtime throws a lost connection, or, with `resend`,
 * the same request sent again once, as a caller retrying a retryable error would.
 */
function lossy(lose: { text?: string; resend?: boolean }): DedupeNamespace {
  return {
    idFromName: (name) => real.idFromName(name),
    get(id) {
      const stub = real.get(id as never);
      return {
        async fetch(url, init) {
          const answer = await stub.fetch(url, init);
          if (lose.text === undefined || !init.body.includes(lose.text) || !init.body.includes('"op":"claim"'))
            return answer;
          lose.text = undefined;
          await answer.json();
          if (lose.resend) return stub.fetch(url, init);
          throw Object.assign(new Error("Network connection lost."), { retryable: true });
        },
      };
    },
  };
}

describe("DurableObjectDedupeStore: a claim whose answer was lost", () => {
  it("sent again, it is this claim: claimed, not read back as another delivery's", async () => {
    const scope = `lost-${randomUUID().slice(0, 8)}`;
    const id = `evt_${randomUUID()}`;
    const store = new DurableObjectDedupeStore(lossy({ text: id, resend: true }), { scope, shards: 2 });
    expect(await store.claim(id, 60_000)).toBe("claimed");
    // Still one claim, this store's: another delivery finds it in flight, and its release frees it.
    const peer = new DurableObjectDedupeStore(real, { scope, shards: 2 });
    expect(await peer.claim(id, 60_000)).toBe("in_flight");
    expect(await store.claim(id, 60_000)).toBe("in_flight");
    await store.release(id);
    expect(await peer.claim(id, 60_000)).toBe("claimed");
  });

  it("failed, it is freed (that claim only), so the sender's retry claims the id at once", async () => {
    const scope = `lost-${randomUUID().slice(0, 8)}`;
    const id = `evt_${randomUUID()}`;
    const store = new DurableObjectDedupeStore(lossy({ text: id }), { scope, shards: 2 });
    await expect(store.claim(id, 60_000)).rejects.toThrow("Network connection lost");
    const peer = new DurableObjectDedupeStore(real, { scope, shards: 2 });
    await expect.poll(() => peer.claim(id, 60_000), { timeout: 3000 }).toBe("claimed");
    // And never another delivery's claim: the peer's stands against a claim that fails again.
    const again = new DurableObjectDedupeStore(lossy({ text: id }), { scope, shards: 2 });
    await expect(again.claim(id, 60_000)).rejects.toThrow("Network connection lost");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await new DurableObjectDedupeStore(real, { scope, shards: 2 }).claim(id, 60_000)).toBe("in_flight");
  });

  it("through a receiver: 503, then the retry runs the handler at once instead of 409 for the lease", async () => {
    const scope = `lost-${randomUUID().slice(0, 8)}`;
    const secret = "whsec-durable-object-lost";
    const event = createEvent("flag.updated");
    const handled: string[] = [];
    const receive = webhookHandler({
      secret,
      dedupe: {
        store: new DurableObjectDedupeStore(lossy({ text: event.id }), { scope, shards: 2 }),
        ttl: "1h",
        inFlightTtl: "60s",
      },
      onError: () => {},
      onEvent: (delivered) => {
        handled.push(delivered.id);
      },
    });
    expect((await receive(await signedRequest({ secret, event }))).status).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await receive(await signedRequest({ secret, event }))).status).toBe(204);
    expect(handled).toEqual([event.id]);
  });
});
