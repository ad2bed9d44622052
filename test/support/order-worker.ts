import { randomUUID } from "node:crypto";
import fc from "fast-check";
import type { WebhookEvent } from "flag-webhooks";
import type { InboxWorker, KeptHandler } from "flag-webhooks/postgres";
import { createEvent, FlagMirror, inOrder, shuffledCopy } from "flag-webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { fakeClock, type KeepingInbox } from "./keep-then-work.js";
import { eventsOf, histories, propertyRuns } from "./order.js";
import { mirrorStatements, wrongFields } from "./order-mirror.js";

// Ordered delivery through keep-then-work, one suite each inbox runs (Postgres, SQLite): the
// worker orders each attempt in its transaction as handle() does, so an old event retried (or
// replayed) after a newer one succeeded never undoes it. The handler writes a mirror of flag
// state through tx (test/support/order-mirror.ts), which must end as the history applied in order.

/** One database under the suite. */
export interface OrderWorkerSubject {
  /** A migrated inbox of `scope` with `order` (and `handleStale` when asked), reading `now`. */
  inbox(scope: string, now: () => number, handleStale?: boolean): Promise<KeepingInbox>;
  /** Runs a `$1` statement through the handler's `tx`. */
  exec(tx: unknown, sql: string, params: string[]): Promise<unknown>;
  /** The mirror of `scope`, in FlagMirror's snapshot form. */
  mirror(scope: string): Promise<Record<string, unknown>>;
}

/** The suite over `setup()` (made once); `name` says which database. */
export function describeOrderedWorker(
  name: string,
  setup: () => Promise<OrderWorkerSubject>,
  options: { runs: number; skip?: string },
): void {
  describe.skipIf(options.skip !== undefined)(`ordered keep then work: ${name}`, () => {
    let subject: OrderWorkerSubject | undefined;
    const workers: InboxWorker[] = [];
    afterAll(() => Promise.all(workers.map((worker) => worker.close())));
    const subjectOf = async () => {
      subject ??= await setup();
      return subject;
    };
    /** A drained worker whose handler applies what it sees to the mirror of `scope` (and may fail first). */
    const mirroring = (
      s: OrderWorkerSubject,
      inbox: KeepingInbox,
      scope: string,
      fail: (event: WebhookEvent) => boolean,
    ) => {
      const seen: WebhookEvent[] = [];
      const fn: KeptHandler<unknown> = async (event, tx) => {
        for (const [sql, params] of mirrorStatements(scope, event)) await s.exec(tx, sql, params);
        if (fail(event)) throw new Error("the handler failed");
        seen.push(event);
      };
      const worker = inbox.work(fn, { interval: false, retries: ["10s", "10s", "10s"], jitter: 0 });
      workers.push(worker);
      return { worker, seen };
    };
    const rollout = (id: string, createdAt: string, to: number) =>
      createEvent("flag.updated", {
        id,
        createdAt,
        data: { flag: "checkout", changes: [{ path: "rollout.percent", from: null, to }] },
      }) as WebhookEvent;
    const ROLLOUT = JSON.stringify(["checkout", "production", "rollout.percent"]);

    it("an old event that failed, retried after a newer one succeeded, is stale: done without the handler, the newer value stays", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const scope = `order-${randomUUID().slice(0, 8)}`;
      const inbox = await s.inbox(scope, clock.now);
      const old = rollout("evt_old", "2026-11-21T09:01:00Z", 10);
      const { worker, seen } = mirroring(s, inbox, scope, (event) => event.id === old.id && seen.length === 0);
      await inbox.enqueue()(old);
      expect(await worker.drain()).toBe(1);
      expect(await inbox.kept(old.id)).toMatchObject({ state: "pending", attempts: 1 });
      await inbox.enqueue()(rollout("evt_new", "2026-11-21T09:02:00Z", 50));
      expect(await worker.drain()).toBe(1);
      clock.advance(10_000);
      expect(await worker.drain()).toBe(1);
      expect(await inbox.kept(old.id)).toMatchObject({ state: "done", attempts: 2 });
      expect(seen.map((event) => event.id)).toEqual(["evt_new"]);
      expect(await s.mirror(scope)).toEqual({ [ROLLOUT]: 50 });
    });

    it("a parked old event replayed after a newer one: stale, and with handleStale the handler sees it with no change to apply", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      for (const handleStale of [false, true]) {
        const scope = `order-${randomUUID().slice(0, 8)}`;
        const inbox = await s.inbox(scope, clock.now, handleStale);
        let down = true;
        const { worker, seen } = mirroring(s, inbox, scope, () => down);
        const old = rollout("evt_old", "2026-11-21T09:01:00Z", 10);
        await inbox.enqueue()(old);
        for (let attempt = 0; attempt < 4; attempt++) {
          await worker.drain();
          clock.advance(10_000);
        }
        expect(await inbox.parked()).toMatchObject([{ id: old.id }]);
        down = false;
        await inbox.enqueue()(rollout("evt_new", "2026-11-21T09:02:00Z", 50));
        expect(await worker.drain()).toBe(1);
        expect(await inbox.replay(old.id)).toBe(1);
        expect(await worker.drain()).toBe(1);
        expect(await inbox.kept(old.id)).toMatchObject({ state: "done" });
        expect(await s.mirror(scope)).toEqual({ [ROLLOUT]: 50 });
        const late = seen.find((event) => event.id === old.id);
        if (!handleStale) expect(late).toBeUndefined();
        else expect(late).toMatchObject({ data: { changes: [] }, staleChanges: [{ to: 10 }] });
      }
    });

    it(`property: shuffled, duplicated deliveries through enqueue and the worker, handlers failing up to twice: the mirror is the in-order state (${options.runs} runs)`, async () => {
      const s = await subjectOf();
      await fc.assert(
        fc.asyncProperty(histories(6), fc.array(fc.nat(2), { minLength: 6, maxLength: 6 }), async (history, fails) => {
          const clock = fakeClock();
          const scope = `order-${randomUUID().slice(0, 8)}`;
          const inbox = await s.inbox(scope, clock.now);
          const events = eventsOf(history);
          const left = new Map(events.map((event, i) => [event.id, fails[i] ?? 0]));
          const { worker } = mirroring(s, inbox, scope, (event) => {
            const more = left.get(event.id) ?? 0;
            left.set(event.id, more - 1);
            return more > 0;
          });
          const onEvent = inbox.enqueue();
          for (const event of shuffledCopy(events, { seed: history.seed, duplicates: 0.4 })) {
            await onEvent(event);
            // Some attempts run between deliveries, so retries come after newer events.
            if (history.seed % 2 === 0) await worker.drain();
          }
          for (let round = 0; round < 4; round++) {
            await worker.drain();
            clock.advance(10_000);
          }
          expect(await inbox.pending()).toEqual([]);
          const expected = new FlagMirror();
          for (const event of inOrder(events)) expected.apply(event);
          const actual = await s.mirror(scope);
          expect(wrongFields(actual, expected.snapshot())).toBe(0);
        }),
        { numRuns: propertyRuns(options.runs) },
      );
    }, 120_000);
  });
}
