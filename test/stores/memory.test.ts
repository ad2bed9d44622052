import fc from "fast-check";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { describeStoreContract } from "../support/store-contract.js";

// MemoryDedupeStore, the store of one process: the contract every store passes, its bound
// (maxKeys), its clock and how it sweeps what expired, and its optional scope.

const SECRET = "memory-store-secret";

describeStoreContract("MemoryDedupeStore", { make: async () => ({ store: new MemoryDedupeStore() }) });
describeStoreContract("MemoryDedupeStore with a scope", {
  make: async () => ({ store: new MemoryDedupeStore({ scope: "audit-app", maxKeys: 1000 }) }),
});

describe("MemoryDedupeStore bounds and clock", () => {
  it("holds at most maxKeys ids, forgetting the oldest first", () => {
    const store = new MemoryDedupeStore({ maxKeys: 3 });
    for (const event of ["a", "b", "c", "d"]) {
      expect(store.claim(event, 10_000)).toBe("claimed");
      store.complete(event, 10_000);
    }
    expect(store.size).toBe(3);
    expect(store.claim("b", 10_000)).toBe("done");
    expect(store.claim("c", 10_000)).toBe("done");
    expect(store.claim("d", 10_000)).toBe("done");
    // "a" was the oldest: evicted, so it can be claimed again (which in turn evicts "b").
    expect(store.claim("a", 10_000)).toBe("claimed");
    expect(store.size).toBe(3);
    expect(store.claim("b", 10_000)).toBe("claimed");
  });

  it("counts a completed id as written when it completed, so a fresh completion outlives older ids", () => {
    const store = new MemoryDedupeStore({ maxKeys: 2 });
    store.claim("old", 10_000);
    store.claim("new", 10_000);
    store.complete("old", 10_000); // re-written last: "new" is now the oldest write
    store.claim("third", 10_000);
    expect(store.claim("old", 10_000)).toBe("done");
    expect(store.claim("new", 10_000)).toBe("claimed");
  });

  it("expires done ids after ttl and claims after their lease, by the injected clock", () => {
    let now = 1_000_000;
    const store = new MemoryDedupeStore({ now: () => now });
    expect(store.claim("x", 100)).toBe("claimed");
    now += 99;
    expect(store.claim("x", 100)).toBe("in_flight");
    now += 1;
    expect(store.claim("x", 100)).toBe("claimed");
    store.complete("x", 500);
    now += 499;
    expect(store.claim("x", 100)).toBe("done");
    now += 1;
    expect(store.claim("x", 100)).toBe("claimed");
  });

  it("sweeps expired ids as it is written to, so size falls back without a timer", () => {
    let now = 0;
    const store = new MemoryDedupeStore({ now: () => now });
    for (let i = 0; i < 100; i++) store.complete(`old-${i}`, 10);
    expect(store.size).toBe(100);
    now = 1000;
    for (let i = 0; i < 40; i++) store.complete(`new-${i}`, 10_000);
    // Each write sweeps up to four expired entries: 100 expired ones are gone after 25 writes.
    expect(store.size).toBe(40);
  });

  it("behaves as a plain model of itself over any sequence of claims, completions, releases and time", () => {
    // The model: the ids in write order in an array, swept from the front on each write exactly
    // as documented (past maxKeys the oldest goes; up to four expired ones go).
    type Op = { kind: "claim" | "complete" | "release"; id: number; ms: number } | { kind: "wait"; ms: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({
        kind: fc.constantFrom("claim", "complete", "release") as fc.Arbitrary<"claim" | "complete" | "release">,
        id: fc.integer({ min: 0, max: 7 }),
        ms: fc.integer({ min: 0, max: 50 }), // 0: expired as it is written
      }),
      fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 60 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(op, { maxLength: 120 }), (maxKeys, ops) => {
        let now = 0;
        const store = new MemoryDedupeStore({ maxKeys, now: () => now });
        let model: { id: string; done: boolean; expires: number }[] = [];
        const write = (id: string, done: boolean, expires: number) => {
          model = model.filter((e) => e.id !== id);
          model.push({ id, done, expires });
          let swept = 0;
          while (model.length > 0) {
            const oldest = model[0] as (typeof model)[0];
            if (model.length > maxKeys || (oldest.expires <= now && swept < 4)) {
              model.shift();
              swept++;
            } else break;
          }
        };
        for (const step of ops) {
          if (step.kind === "wait") {
            now += step.ms;
            continue;
          }
          const id = `evt_${step.id}`;
          const held = model.find((e) => e.id === id);
          if (step.kind === "claim") {
            const expected = held && held.expires > now ? (held.done ? "done" : "in_flight") : "claimed";
            expect(store.claim(id, step.ms)).toBe(expected);
            if (expected === "claimed") write(id, false, now + step.ms);
          } else if (step.kind === "complete") {
            store.complete(id, step.ms);
            write(id, true, now + step.ms);
          } else {
            store.release(id);
            if (held && !held.done) model = model.filter((e) => e.id !== id);
          }
          expect(store.size).toBe(model.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("refuses a maxKeys that is not a positive whole number", () => {
    for (const maxKeys of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new MemoryDedupeStore({ maxKeys })).toThrow(/maxKeys/);
    }
  });

  it("sweeps at most four expired ids per write, so a write costs the same however many expired", () => {
    let now = 0;
    const store = new MemoryDedupeStore({ now: () => now });
    for (let i = 0; i < 10; i++) store.complete(`old-${i}`, 10);
    now = 1000;
    store.complete("new-0", 10_000);
    expect(store.size).toBe(7); // 10 expired + 1 new - 4 swept
    store.claim("new-1", 10_000);
    expect(store.size).toBe(4);
    store.complete("new-2", 10_000);
    expect(store.size).toBe(3); // the last 2 expired go, the live ids stay
    // The expired ids are gone for good: each can be claimed afresh.
    expect(store.claim("old-0", 10_000)).toBe("claimed");
  });

  it.each([
    ["NaN", () => Number.NaN],
    ["Infinity", () => Number.POSITIVE_INFINITY],
    ["-Infinity", () => Number.NEGATIVE_INFINITY],
    ["a string", () => "1000"],
    ["undefined", () => undefined],
    ["a Date object", () => new Date()],
  ])(
    "refuses to claim with a clock that answers %s, so a receiver fails closed and a second copy never runs: dedupe must not turn itself off",
    async (_, now) => {
      const store = new MemoryDedupeStore({ now: now as () => number });
      expect(() => store.claim("evt_1", 1000)).toThrow(
        new TypeError("flag-webhooks: MemoryDedupeStore's now() must return a finite number of ms"),
      );
      let runs = 0;
      const receive = webhookHandler({
        secret: SECRET,
        dedupe: { store, ttl: 60_000 },
        onError: () => {},
        onEvent: () => void runs++,
      });
      const d = await delivery(SECRET);
      const request = () =>
        new Request("http://localhost/webhooks", { method: "POST", body: d.body, headers: d.headers });
      expect([(await receive(request())).status, (await receive(request())).status, runs]).toEqual([503, 503, 0]);
    },
  );
});

describe("MemoryDedupeStore scope", () => {
  it("is optional, and checked like the shared stores' when given", () => {
    expect(new MemoryDedupeStore({ scope: "audit-app" }).claim("evt_1", 1000)).toBe("claimed");
    for (const scope of ["", "a b", "x".repeat(101), 7]) {
      expect(() => new MemoryDedupeStore({ scope } as never)).toThrow(/option "scope" of MemoryDedupeStore/);
    }
  });
});
