import { createHash, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { DedupeStore } from "flag-webhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The DedupeStore contract, one suite that every store runs: the in-process MemoryDedupeStore,
// RedisDedupeStore over each client, and every store added later. Real time, short ttls.

const LEASE = 120; // ms: a claim's lease in the expiry cases
const TTL = 250; // ms: how long a completed id stays done in the expiry case

/** One store under test, over its real backend. */
export interface ContractSubject {
  store: DedupeStore;
  /** A second instance over the same backend and scope (another process's store), when there is one. */
  peer?: DedupeStore;
  /** An instance over the same backend with another `scope` (another endpoint), when stores are shared. */
  otherScope?: DedupeStore;
}

/** How a suite gets its subject: made once before the cases, closed after them. */
export interface ContractSetup {
  make(): Promise<ContractSubject>;
  close?(): Promise<void>;
  /** Why the backend cannot run here; the suite is skipped with this reason in its name. */
  skip?: string;
  /** The subject has a `peer` over a shared backend: the cross-instance case runs. */
  shared?: boolean;
  /** The subject has an `otherScope`: the scope case runs. */
  scoped?: boolean;
}

const newId = () => `evt_${randomUUID()}`;

/**
 * Runs an expiry case with a span (a ttl, a lease) of `ms`, and again with one 4 times longer
 * while the case says its calls took too long to tell (on a loaded machine a store's request can
 * outlast 120 ms): `check(span, inTime)` gets the span and `inTime(start)`, whether the span
 * begun at `start` has not yet run out; it returns false to be tried again. A store that gets
 * expiry wrong fails at every span; only a slow one is given a longer span.
 */
async function withinSpan(
  ms: number,
  check: (span: number, inTime: (start: number) => boolean) => Promise<boolean>,
): Promise<void> {
  for (let span = ms; span <= 64 * ms; span *= 4) {
    if (await check(span, (start) => performance.now() - start < span)) return;
  }
  throw new Error(`every span up to ${64 * ms} ms ran out before the store answered`);
}

/**
 * Checks the scope rule a shared store applies when it is made, one rule for every store (1-100
 * characters of A-Z a-z 0-9 . _ -, the option and the store named in the error): `make` builds
 * the store `owner` with the scope given.
 */
export function expectScopeChecked(owner: string, make: (scope: unknown) => unknown): void {
  for (const scope of [undefined, "", "a b", "a#b", "x".repeat(101), "é", 7]) {
    expect(() => make(scope), String(scope)).toThrow(`option "scope" of ${owner} must be 1-100 characters`);
  }
  expect(() => make("audit-app_1.v2")).not.toThrow();
}

/** Runs the contract against one store; a store that fails any case is not a DedupeStore. */
export function describeStoreContract(
  name: string,
  setup: ContractSetup,
  extra?: (subject: () => ContractSubject) => void,
): void {
  describe.skipIf(setup.skip !== undefined)(
    `dedupe store contract: ${name}${setup.skip ? ` (skipped: ${setup.skip})` : ""}`,
    () => {
      let s: ContractSubject;
      beforeAll(async () => {
        s = await setup.make();
      });
      afterAll(async () => {
        await setup.close?.();
      });

      it("claims a free id once: a second claim, from any instance, is in_flight", async () => {
        const event = newId();
        expect(await s.store.claim(event, 10_000)).toBe("claimed");
        expect(await s.store.claim(event, 10_000)).toBe("in_flight");
        if (s.peer) expect(await s.peer.claim(event, 10_000)).toBe("in_flight");
      });

      it("claims atomically: of many concurrent claims of one id, exactly one wins", async () => {
        const event = newId();
        const stores = s.peer ? [s.store, s.peer] : [s.store];
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) => (stores[i % stores.length] as DedupeStore).claim(event, 10_000)),
        );
        expect(results.filter((r) => r === "claimed")).toHaveLength(1);
        expect(results.filter((r) => r === "in_flight")).toHaveLength(19);
      });

      it("a completed id is done for its ttl, then expires and can be claimed again", async () => {
        await withinSpan(TTL, async (ttl, inTime) => {
          const event = newId();
          expect(await s.store.claim(event, 10_000)).toBe("claimed");
          const completed = performance.now();
          await s.store.complete(event, ttl);
          const seen = [await s.store.claim(event, 10_000), await (s.peer ?? s.store).claim(event, 10_000)];
          if (!inTime(completed)) return false;
          expect(seen).toEqual(["done", "done"]);
          await sleep(ttl + 50);
          expect(await (s.peer ?? s.store).claim(event, 10_000)).toBe("claimed");
          return true;
        });
      });

      it("release frees a claim, so the sender's retry claims it", async () => {
        const event = newId();
        expect(await s.store.claim(event, 10_000)).toBe("claimed");
        await s.store.release(event);
        expect(await (s.peer ?? s.store).claim(event, 10_000)).toBe("claimed");
      });

      it("release does not undo a completed id", async () => {
        const event = newId();
        expect(await s.store.claim(event, 10_000)).toBe("claimed");
        await s.store.complete(event, 10_000);
        await s.store.release(event);
        expect(await s.store.claim(event, 10_000)).toBe("done");
      });

      it("a lease that expires lets the id be claimed again (a crashed handler does not hold it for ever)", async () => {
        await withinSpan(LEASE, async (lease, inTime) => {
          const event = newId();
          const claimed = performance.now();
          expect(await s.store.claim(event, lease)).toBe("claimed");
          const again = await s.store.claim(event, lease);
          if (!inTime(claimed)) return false;
          expect(again).toBe("in_flight");
          await sleep(lease + 50);
          expect(await (s.peer ?? s.store).claim(event, 10_000)).toBe("claimed");
          return true;
        });
      });

      it("ids of every form are keys of their own, each handled once: long, with NUL, ill-formed, spelled like a hash or like SQL", async () => {
        const base = newId();
        // Over every backend's key limit (DynamoDB 2048 bytes, Postgres's btree row ~2.7 KB).
        const long = `${base}${"é".repeat(3000)}`;
        const ids: [label: string, id: string][] = [
          ["a long id", long],
          ["another long id", `${long}x`],
          // The form a long id is stored under, sent as an id of its own.
          ["# and the long id's SHA-256", `#${createHash("sha256").update(long).digest("hex")}`],
          ["# and a short id", `#${base}`],
          // U+0000: Postgres text cannot hold it; C strings end at it.
          ["an id with NUL", `${base}\u0000x`],
          ["another id with NUL", `${base}\u0000y`],
          ["the short id", base],
          // Lone surrogates: UTF-8 writes each of them as U+FFFD, so a client that encodes the id as
          // it is makes them one key.
          ["a lone high surrogate", `${base}\ud800`],
          ["another lone high surrogate", `${base}\udbff`],
          ["U+FFFD", `${base}\ufffd`],
          ["a long id and a lone low surrogate", `${long}\udc00`],
          ["a long id and a lone high surrogate", `${long}\ud800`],
          // Ids that would be SQL, or break it, if a store wrote them into a statement as they are.
          ["an id that closes a quoted string", `${base}'; drop table effects; --`],
          ["an id with backslashes", `${base}\\x00\\`],
          ["a non-ASCII id", `é${base}🚀`],
        ];
        for (const [label, id] of ids) expect(await s.store.claim(id, 10_000), label).toBe("claimed");
        for (const [label, id] of ids) expect(await (s.peer ?? s.store).claim(id, 10_000), label).toBe("in_flight");
        for (const [, id] of ids) await s.store.complete(id, 10_000);
        for (const [label, id] of ids) expect(await (s.peer ?? s.store).claim(id, 10_000), label).toBe("done");
        // A release finds the claim under the same key as the claim did.
        const released = `${long}\u0000r`;
        expect(await s.store.claim(released, 10_000)).toBe("claimed");
        await s.store.release(released);
        expect(await (s.peer ?? s.store).claim(released, 10_000)).toBe("claimed");
      });

      // A store shared by no other instance has no other claim to leave alone; within one store the
      // receiver releases a claim only while its lease lasts (test/receiver/claim.test.ts).
      if (setup.shared) {
        it("release after the lease expired and another instance claimed the id leaves the other's claim alone", async () => {
          const event = newId();
          const peer = s.peer as DedupeStore;
          expect(await s.store.claim(event, LEASE)).toBe("claimed");
          await sleep(LEASE + 50);
          expect(await peer.claim(event, 10_000)).toBe("claimed");
          await s.store.release(event); // the first instance's handler failed, late
          expect(await s.store.claim(event, 10_000)).toBe("in_flight");
          expect(await peer.claim(event, 10_000)).toBe("in_flight");
          // The other instance's own release still works.
          await peer.release(event);
          expect(await s.store.claim(event, 10_000)).toBe("claimed");
        });
      }

      if (setup.scoped) {
        it("another scope is another endpoint: the same id is free there, and done there separately", async () => {
          const other = s.otherScope as DedupeStore;
          const event = newId();
          expect(await s.store.claim(event, 10_000)).toBe("claimed");
          await s.store.complete(event, 10_000);
          expect(await other.claim(event, 10_000)).toBe("claimed");
          expect(await s.store.claim(event, 10_000)).toBe("done");
          await other.release(event);
          expect(await other.claim(event, 10_000)).toBe("claimed");
        });
      }

      extra?.(() => s);
    },
  );
}
