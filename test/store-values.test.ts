import { type DedupeStore, MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it } from "vitest";
import { signedDelivery } from "./support/signed-delivery.js";

// Found by attacking issue 15 items 7 and 8 (fail closed): a store that answers claim() with something
// that is not a ClaimResult, and a MemoryDedupeStore whose clock names no instant, silently turn
// dedupe off before the fix: every copy runs the handler. Failed on 832a504, before the fix.

const SECRET = "attack-store-secret";
const delivery = () => signedDelivery(SECRET);

async function twoCopies(store: DedupeStore) {
  let runs = 0;
  const errors: unknown[] = [];
  const handler = webhookHandler({
    secret: SECRET,
    dedupe: { store, ttl: 60_000 },
    onError: (error) => errors.push(error),
    onEvent: () => {
      runs++;
    },
  });
  const d = delivery();
  const request = () => new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers });
  const answers = [(await handler(request())).status, (await handler(request())).status];
  return { runs, answers, errors };
}

describe("claim() answering something that is no ClaimResult is a store failure, not a claim", () => {
  it.each<[string, unknown]>([
    ["undefined (a store that forgot to return)", undefined],
    ['"claimed " (a trailing space)', "claimed "],
    ["false (a store answering 'was it set?')", false],
    ['"DONE" (another case)', "DONE"],
  ])("%s", async (_name, value) => {
    const store: DedupeStore = {
      claim: () => value as "claimed",
      complete: () => undefined,
      release: () => undefined,
    };
    const { runs, answers, errors } = await twoCopies(store);
    // Today: [204, 204] and 2 runs: dedupe silently off. Failing closed is 503 store_unavailable
    // (the sender retries later), with the store's bad answer told to onError.
    expect(answers).toEqual([503, 503]);
    expect(runs).toBe(0);
    expect(errors.length).toBeGreaterThan(0);
  });
});

describe("MemoryDedupeStore with a clock that names no instant does not turn dedupe off", () => {
  it.each<[string, () => unknown]>([
    ["NaN", () => Number.NaN],
    ["undefined", () => undefined],
    ["a Date object", () => new Date()],
    ["-Infinity", () => Number.NEGATIVE_INFINITY],
  ])("now() returning %s: the second copy never runs the handler", async (_name, now) => {
    // Either the store refuses such a clock when made (a TypeError), or each claim fails closed.
    let store: MemoryDedupeStore;
    try {
      store = new MemoryDedupeStore({ now: now as () => number });
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      return;
    }
    const { runs } = await twoCopies(store);
    // Today: 2: every claim sees an expiry that is never "> now", so every copy is "claimed".
    expect(runs).toBeLessThanOrEqual(1);
  });
});
