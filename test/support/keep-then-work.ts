import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import type { WebhookEvent } from "flag-webhooks";
import type { InboxWorker, KeptEvent, KeptHandler, WorkOptions } from "flag-webhooks/postgres";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, describe, expect, it, vi } from "vitest";
import { adapterReceiver, closeReceivers } from "./adapter-receivers.js";
import { eventJson } from "./deliveries.js";

// Keep-then-work, one suite every inbox runs (Postgres over pg and postgres.js, SQLite over
// better-sqlite3 and libSQL): what a receiver answers, what the worker runs and when on a fake
// clock, parking and replay, racing workers, a hung handler, a body refused on replay, the inline
// mode, prune and purge, and a property over shuffled, duplicated, failing deliveries.

const SECRET = "whsec-keep-then-work-test";
/** The fake clock's start: a fixed instant, far from the real clock. */
const START = Date.UTC(2030, 0, 1);

/** A fake clock an inbox reads. */
export interface Clock {
  now: () => number;
  advance(ms: number): void;
}

export function fakeClock(at = START): Clock {
  let time = at;
  return {
    now: () => time,
    advance(ms) {
      time += ms;
    },
  };
}

/** What the suite needs of an inbox, whichever database it keeps events in. */
export interface KeepingInbox {
  enqueue(options?: { run?: KeptHandler<unknown> } & WorkOptions): (event: WebhookEvent) => Promise<unknown>;
  work(fn: KeptHandler<unknown>, options?: WorkOptions): InboxWorker;
  pending(options?: { limit?: number }): Promise<KeptEvent[]>;
  parked(options?: { limit?: number }): Promise<KeptEvent[]>;
  kept(id: string): Promise<KeptEvent | undefined>;
  replay(target: string | { since: Date | number }): Promise<number>;
  purge(target: string | { state: "parked" | "pending" | "done"; before?: Date | number }): Promise<number>;
  prune(): Promise<number>;
  claim(id: string, lease: number): Promise<string>;
  handle(fn: (event: WebhookEvent, tx: never) => unknown): (event: WebhookEvent) => Promise<unknown>;
}

/** One database under the suite. */
export interface KeepSubject {
  /** An inbox of `scope` on the subject's connection, reading `now`, keeping handled ids `retention`. */
  inbox(scope: string, now: () => number, retention?: number): KeepingInbox;
  /** An inbox of `scope` on a second connection to the same database (another process's), where one can race. */
  peer?(scope: string, now: () => number): KeepingInbox;
  /** Writes the effect row of `id` through the handler's `tx`. */
  write(tx: unknown, id: string): unknown;
  /** How many effect rows `id` has. */
  effects(id: string): Promise<number>;
  /** Replaces the kept body of `id` in `scope` with `body`, as a later parser might refuse it. */
  setBody(scope: string, id: string, body: string): Promise<void>;
}

const newScope = () => `keep-${randomUUID().slice(0, 8)}`;
const newId = () => `evt_${randomUUID()}`;
const eventOf = (id: string) => createEvent("flag.updated", { id }) as WebhookEvent;

/** The suite over `setup()` (made once); `name` says which database and driver. */
export function describeKeepThenWork(name: string, setup: () => Promise<KeepSubject>, skip?: string): void {
  describe.skipIf(skip !== undefined)(`keep then work: ${name}`, () => {
    let subject: KeepSubject;
    const workers: InboxWorker[] = [];
    const subjectOf = async () => {
      subject ??= await setup();
      return subject;
    };
    afterAll(async () => {
      await Promise.all(workers.map((worker) => worker.close()));
      await closeReceivers();
    });
    /** A worker that only runs when drained, and is closed after the suite. */
    const worker = (inbox: KeepingInbox, fn: KeptHandler<unknown>, options: WorkOptions = {}) => {
      const made = inbox.work(fn, { interval: false, ...options });
      workers.push(made);
      return made;
    };

    it("keeps the body exactly as received and answers 202, a copy 204 whatever its state, and the worker runs it once", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const scope = newScope();
      const inbox = s.inbox(scope, clock.now);
      const send = await adapterReceiver("fetch", { secret: SECRET, onEvent: inbox.enqueue() });
      const id = newId();
      // Whitespace and key order a re-serialisation would not reproduce.
      const text = ` ${eventJson(id).replace('{"', '{  "')}\n`;
      const first = await send(text);
      expect(first.status).toBe(202);
      const kept = await inbox.kept(id);
      expect(kept).toMatchObject({ id, state: "pending", type: "flag.updated", attempts: 0, body: text });
      expect(kept?.receivedAt).toBe(clock.now());
      expect(kept?.createdAt).toBe(JSON.parse(text).createdAt);
      const copy = await send(text);
      expect(copy.status).toBe(204);
      expect(copy.headers["webhook-duplicate"]).toBe("true");
      const seen: string[] = [];
      const w = worker(inbox, async (event, tx) => {
        seen.push(event.id);
        await s.write(tx, event.id);
      });
      expect(await w.drain()).toBe(1);
      expect(await w.drain()).toBe(0);
      expect(seen).toEqual([id]);
      expect(await s.effects(id)).toBe(1);
      expect((await inbox.kept(id))?.state).toBe("done");
      expect((await send(text)).status).toBe(204);
      expect(await s.effects(id)).toBe(1);
    });

    it("a started worker looks for due events on its own, and close() waits for the attempt that runs", async () => {
      const s = await subjectOf();
      const inbox = s.inbox(newScope(), Date.now);
      let release = () => {};
      const ran: string[] = [];
      const started = inbox.work(
        async (event, tx) => {
          ran.push(event.id);
          await new Promise<void>((resolve) => {
            release = resolve;
          });
          await s.write(tx, event.id);
        },
        { interval: 20 },
      );
      const id = newId();
      await inbox.enqueue()(eventOf(id));
      await vi.waitFor(() => expect(ran).toEqual([id]), { timeout: 10_000, interval: 20 });
      let closed = false;
      const closing = started.close().then(() => {
        closed = true;
      });
      await sleep(50);
      expect(closed).toBe(false);
      release();
      await closing;
      expect(await s.effects(id)).toBe(1);
      expect((await inbox.kept(id))?.state).toBe("done");
    });

    it("answers 409 delivery_in_progress for an id a DedupeStore claim of the scope holds, and keeps nothing", async () => {
      const s = await subjectOf();
      const inbox = s.inbox(newScope(), Date.now);
      const id = newId();
      expect(await inbox.claim(id, 60_000)).toBe("claimed");
      await expect(inbox.enqueue()(eventOf(id))).rejects.toMatchObject({ code: "delivery_in_progress" });
      expect((await inbox.kept(id))?.state).toBe("claimed");
    });

    it("a copy of a kept event (pending or parked) through handle() is a duplicate 204, not run, and a DedupeStore claim finds it done", async () => {
      const s = await subjectOf();
      const inbox = s.inbox(newScope(), Date.now);
      const [parked, pending] = [newId(), newId()];
      await inbox.enqueue()(eventOf(parked));
      expect(await worker(inbox, () => Promise.reject(new Error("poison")), { retries: [] }).drain()).toBe(1);
      await inbox.enqueue()(eventOf(pending));
      expect([(await inbox.kept(parked))?.state, (await inbox.kept(pending))?.state]).toEqual(["parked", "pending"]);
      const ran: string[] = [];
      const send = await adapterReceiver("fetch", {
        secret: SECRET,
        onEvent: inbox.handle((event) => void ran.push(event.id)),
      });
      for (const id of [parked, pending]) {
        const answer = await send(eventJson(id));
        expect([answer.status, answer.headers["webhook-duplicate"]], id).toEqual([204, "true"]);
        expect(await inbox.claim(id, 60_000)).toBe("done");
      }
      expect(ran).toEqual([]);
      expect([(await inbox.kept(parked))?.state, (await inbox.kept(pending))?.state]).toEqual(["parked", "pending"]);
    });

    it("runs a handler that fails 3 times exactly 4 times, at the schedule's times, its effect once", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const inbox = s.inbox(newScope(), clock.now);
      const id = newId();
      expect(await inbox.enqueue()(eventOf(id))).toEqual({ status: 202 });
      const start = clock.now();
      const runs: number[] = [];
      const w = worker(
        inbox,
        async (event, tx, { attempt }) => {
          runs.push(clock.now());
          await s.write(tx, event.id);
          if (attempt <= 3) throw new Error(`fails on attempt ${attempt}`);
        },
        { retries: ["10s", "1m", "5m", "30m"], jitter: 0 },
      );
      for (const delay of [10_000, 60_000, 300_000]) {
        expect(await w.drain()).toBe(1);
        expect(await s.effects(id)).toBe(0);
        const kept = await inbox.kept(id);
        expect(kept).toMatchObject({ state: "pending", nextAttemptAt: clock.now() + delay });
        expect(kept?.lastError).toMatch(/^fails on attempt/);
        clock.advance(delay - 1);
        expect(await w.drain()).toBe(0);
        clock.advance(1);
      }
      expect(await w.drain()).toBe(1);
      expect(runs).toEqual([start, start + 10_000, start + 70_000, start + 370_000]);
      expect(await s.effects(id)).toBe(1);
      expect(await inbox.kept(id)).toMatchObject({ state: "done", attempts: 4 });
    });

    it("parks a poison event after its last attempt; replay runs it once more, done once", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const inbox = s.inbox(newScope(), clock.now);
      const id = newId();
      await inbox.enqueue()(eventOf(id));
      let poison = true;
      let runs = 0;
      const w = worker(
        inbox,
        async (event, tx) => {
          runs++;
          await s.write(tx, event.id);
          if (poison) throw new Error("poison");
        },
        { retries: ["1s", "1s"], jitter: 0 },
      );
      for (let i = 0; i < 5; i++) {
        await w.drain();
        clock.advance(1000);
      }
      expect(runs).toBe(3);
      expect(await inbox.parked()).toMatchObject([{ id, state: "parked", attempts: 3, lastError: "poison" }]);
      expect(await inbox.pending()).toEqual([]);
      poison = false;
      expect(await inbox.replay(id)).toBe(1);
      expect(await w.drain()).toBe(1);
      expect(runs).toBe(4);
      expect(await s.effects(id)).toBe(1);
      expect(await inbox.kept(id)).toMatchObject({ state: "done", attempts: 1 });
      // A done event is never run again.
      expect(await inbox.replay(id)).toBe(0);
      expect(await inbox.replay({ since: 0 })).toBe(0);
      expect(await w.drain()).toBe(0);
      expect(runs).toBe(4);
    });

    it("replays every parked event kept since an instant, and no other", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const inbox = s.inbox(newScope(), clock.now);
      const [old, recent] = [newId(), newId()];
      await inbox.enqueue()(eventOf(old));
      clock.advance(60_000);
      const since = clock.now();
      await inbox.enqueue()(eventOf(recent));
      const w = worker(inbox, () => Promise.reject(new Error("down")), { retries: [] });
      expect(await w.drain()).toBe(2);
      expect((await inbox.parked()).map((event) => event.id)).toEqual([old, recent]);
      expect(await inbox.replay({ since: new Date(since) })).toBe(1);
      expect((await inbox.pending()).map((event) => event.id)).toEqual([recent]);
    });

    it("parks, with the reason, an event whose kept body the parser refuses, without calling the handler", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const scope = newScope();
      const inbox = s.inbox(scope, clock.now);
      const id = newId();
      await inbox.enqueue()(eventOf(id));
      await s.setBody(scope, id, JSON.stringify({ id, type: "flag.updated" }));
      let runs = 0;
      const w = worker(inbox, () => {
        runs++;
      });
      await w.drain();
      clock.advance(24 * 3600_000);
      await w.drain();
      expect(runs).toBe(0);
      const [parked] = await inbox.parked();
      expect(parked).toMatchObject({ id, state: "parked", attempts: 1 });
      expect(parked?.lastError).toMatch(/^the body no longer parses: /);
    });

    it("counts a handler that hangs past its deadline as a failed attempt, and nothing of it commits", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const inbox = s.inbox(newScope(), clock.now);
      const id = newId();
      await inbox.enqueue()(eventOf(id));
      const w = worker(
        inbox,
        async (event, tx, { signal }) => {
          await s.write(tx, event.id);
          // Hangs until the worker gives up on it, then ends as a well-behaved handler does.
          await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
        },
        { deadline: 150, lease: "1m", retries: ["1m"], jitter: 0 },
      );
      expect(await w.drain()).toBe(1);
      const kept = await inbox.kept(id);
      expect(kept).toMatchObject({ state: "pending", attempts: 1, nextAttemptAt: clock.now() + 60_000 });
      expect(kept?.lastError).toMatch(/deadline of 150 ms/);
      expect(await s.effects(id)).toBe(0);
    });

    it("inline first, kept on failure: 204 when the handler succeeds in the request, 202 and retried when it fails", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const inbox = s.inbox(newScope(), clock.now);
      const failing = new Set<string>();
      const run: KeptHandler<unknown> = async (event, tx) => {
        await s.write(tx, event.id);
        if (failing.delete(event.id)) throw new Error("downstream is down");
      };
      const send = await adapterReceiver("Express", {
        secret: SECRET,
        onEvent: inbox.enqueue({ run, retries: ["1m"], jitter: 0 }),
      });
      const [good, bad] = [newId(), newId()];
      expect((await send(eventJson(good))).status).toBe(204);
      expect(await inbox.kept(good)).toMatchObject({ state: "done", attempts: 1 });
      failing.add(bad);
      expect((await send(eventJson(bad))).status).toBe(202);
      expect(await inbox.kept(bad)).toMatchObject({ state: "pending", attempts: 1, lastError: "downstream is down" });
      expect(await s.effects(bad)).toBe(0);
      expect((await send(eventJson(bad))).status).toBe(204);
      clock.advance(60_000);
      expect(await worker(inbox, run).drain()).toBe(1);
      expect(await s.effects(good)).toBe(1);
      expect(await s.effects(bad)).toBe(1);
    });

    it("lets two workers on two connections race for the same events: each runs once", async () => {
      const s = await subjectOf();
      if (!s.peer) return;
      const clock = fakeClock();
      const scope = newScope();
      const [a, b] = [s.inbox(scope, clock.now), s.peer(scope, clock.now)];
      const ids = Array.from({ length: 16 }, newId);
      for (const id of ids) await a.enqueue()(eventOf(id));
      const runs = new Map<string, number>();
      const fn: KeptHandler<unknown> = async (event, tx) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        await sleep(5);
        await s.write(tx, event.id);
      };
      const drained = await Promise.all([
        worker(a, fn, { concurrency: 3 }).drain(),
        worker(b, fn, { concurrency: 3 }).drain(),
      ]);
      expect(drained[0] + drained[1]).toBe(ids.length);
      for (const id of ids) {
        expect(runs.get(id)).toBe(1);
        expect(await s.effects(id)).toBe(1);
      }
    });

    it("never runs an event twice at once: a worker whose lease lapsed mid-handler keeps it from another", async () => {
      const s = await subjectOf();
      if (!s.peer) return;
      const clock = fakeClock();
      const scope = newScope();
      const [a, b] = [s.inbox(scope, clock.now), s.peer(scope, clock.now)];
      const id = newId();
      await a.enqueue()(eventOf(id));
      let running = 0;
      let most = 0;
      let runs = 0;
      let release = () => {};
      let started = () => {};
      const began = new Promise<void>((resolve) => {
        started = resolve;
      });
      const fn: KeptHandler<unknown> = async (event, tx) => {
        runs++;
        most = Math.max(most, ++running);
        started();
        if (runs === 1)
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        await s.write(tx, event.id);
        running--;
      };
      const options = { lease: "1m", deadline: "30s" };
      const first = worker(a, fn, options).drain();
      await began;
      clock.advance(61_000);
      const second = worker(b, fn, options).drain();
      await sleep(100);
      release();
      await Promise.all([first, second]);
      expect(most).toBe(1);
      expect(runs).toBe(1);
      expect(await s.effects(id)).toBe(1);
      expect(await a.kept(id)).toMatchObject({ state: "done", attempts: 1 });
    });

    it("prune() deletes handled ids past retention and keeps pending and parked events", async () => {
      const s = await subjectOf();
      const inbox = s.inbox(newScope(), Date.now, 1);
      const [done, parked, pending] = [newId(), newId(), newId()];
      for (const id of [done, parked]) await inbox.enqueue()(eventOf(id));
      await worker(
        inbox,
        (event) => {
          if (event.id === parked) throw new Error("parked");
        },
        { retries: [] },
      ).drain();
      await inbox.enqueue()(eventOf(pending));
      await sleep(20);
      expect(await inbox.prune()).toBe(1);
      expect(await inbox.kept(done)).toBeUndefined();
      expect((await inbox.kept(parked))?.state).toBe("parked");
      expect((await inbox.kept(pending))?.state).toBe("pending");
    });

    it("an id handled past its retention, not pruned yet: a new delivery of it is kept anew, 202, and run again", async () => {
      const s = await subjectOf();
      const inbox = s.inbox(newScope(), Date.now, 1);
      const id = newId();
      const runs: string[] = [];
      const handler = (event: WebhookEvent) => {
        runs.push(event.id);
      };
      expect(await inbox.enqueue()(eventOf(id))).toEqual({ status: 202 });
      await worker(inbox, handler).drain();
      await sleep(20);
      expect(await inbox.enqueue()(eventOf(id))).toEqual({ status: 202 });
      expect(await inbox.kept(id)).toMatchObject({ state: "pending", attempts: 0 });
      expect(await inbox.enqueue()(eventOf(id))).toMatchObject({ status: 204 });
      await worker(inbox, handler).drain();
      expect(runs).toEqual([id, id]);
    });

    it("purge() racing a worker: an event ends done with its effect once, or gone without one", async () => {
      const s = await subjectOf();
      const clock = fakeClock();
      const inbox = s.inbox(newScope(), clock.now);
      const ids = Array.from({ length: 20 }, newId);
      for (const id of ids) await inbox.enqueue()(eventOf(id));
      const w = worker(
        inbox,
        async (event, tx) => {
          await s.write(tx, event.id);
          await sleep(2);
        },
        { concurrency: 2 },
      );
      const [, purged] = await Promise.all([w.drain(), sleep(10).then(() => inbox.purge({ state: "pending" }))]);
      let gone = 0;
      for (const id of ids) {
        const kept = await inbox.kept(id);
        if (kept === undefined) gone++;
        else expect(kept.state).toBe("done");
        expect(await s.effects(id)).toBe(kept === undefined ? 0 : 1);
      }
      expect(gone).toBe(purged);
    });

    it("property: shuffled, duplicated deliveries, arriving while the worker runs, of handlers that fail 0 to 5 times: each runs exactly its failures + 1 times (at most 5), its effect once, parked only past the schedule", async () => {
      const s = await subjectOf();
      const retries = ["1s", "2s", "4s", "8s"];
      const attempts = retries.length + 1;
      // A step between two batches of copies arriving at once: the worker drains, or the clock moves.
      const step = fc.oneof(fc.constant("drain" as const), fc.integer({ min: 1, max: 15_000 }));
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.nat(attempts), { minLength: 1, maxLength: 5 }),
          fc.array(fc.tuple(fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), step), { maxLength: 6 }),
          async (failures, batches) => {
            const clock = fakeClock();
            const inbox = s.inbox(newScope(), clock.now);
            const ids = failures.map(newId);
            const runs = new Map<string, number>();
            const w = worker(
              inbox,
              async (event, tx) => {
                const run = (runs.get(event.id) ?? 0) + 1;
                runs.set(event.id, run);
                await s.write(tx, event.id);
                if (run <= (failures[ids.indexOf(event.id)] as number)) throw new Error(`fails run ${run}`);
              },
              { retries, jitter: 0.5 },
            );
            const onEvent = inbox.enqueue();
            const answers = new Map<string, number[]>();
            const deliver = async (batch: readonly string[]) => {
              const got = await Promise.all(batch.map((id) => onEvent(eventOf(id))));
              for (const [k, id] of batch.entries()) {
                answers.set(id, [...(answers.get(id) ?? []), (got[k] as { status: number }).status]);
              }
            };
            // Every event once, at once, then copies of any of them between drains and clock moves.
            await deliver(ids);
            for (const [copies, then] of batches) {
              await deliver(copies.map((n) => ids[n % ids.length] as string));
              if (then === "drain") await w.drain();
              else clock.advance(then);
            }
            for (let round = 0; round <= attempts; round++) {
              await w.drain();
              clock.advance(20_000);
            }
            for (const [k, id] of ids.entries()) {
              const fails = failures[k] as number;
              const parked = fails >= attempts;
              expect(runs.get(id), id).toBe(parked ? attempts : fails + 1);
              expect(await s.effects(id), id).toBe(parked ? 0 : 1);
              expect(await inbox.kept(id)).toMatchObject({ state: parked ? "parked" : "done" });
              const [first, ...copies] = answers.get(id) ?? [];
              expect([first, ...new Set(copies)]).toEqual(copies.length ? [202, 204] : [202]);
            }
            expect(await inbox.pending()).toEqual([]);
          },
        ),
        // As many runs as fit in about 10 s on this database, up to 1,000; KEEP_PROPERTY_RUNS sets
        // fewer (a mutation run, where every surviving mutant would otherwise take the 10 s).
        { numRuns: Number(process.env.KEEP_PROPERTY_RUNS) || 1_000, interruptAfterTimeLimit: 10_000 },
      );
    }, 60_000);
  });
}

/**
 * An attempt whose handler is stuck in a statement on the server past its deadline: `hold()` takes
 * a lock outside the inbox and resolves with its release; an event is kept in the inbox
 * `inboxOf()` makes, and a worker (deadline 150 ms, lease 1 min) runs `runStatement(tx, id)`, which
 * waits on that lock and ignores its signal. drain() must end while the statement still waits;
 * the lock is let go only then. Resolves with the event's id and the inbox, once drained and closed.
 */
export async function stuckAttempt(
  inboxOf: () => KeepingInbox,
  runStatement: (tx: unknown, id: string) => Promise<unknown>,
  hold: () => Promise<() => Promise<void>>,
): Promise<{ id: string; inbox: KeepingInbox }> {
  const release = await hold();
  const inbox = inboxOf();
  const id = newId();
  await inbox.enqueue()(eventOf(id));
  const worker = inbox.work((event, tx) => runStatement(tx, event.id), {
    interval: false,
    deadline: 150,
    lease: "1m",
    retries: ["1h"],
  });
  let drained = false;
  const draining = worker.drain().then(() => {
    drained = true;
  });
  try {
    // A liveness bound 60 times the deadline, not a speed claim.
    await vi.waitFor(() => expect(drained).toBe(true), { timeout: 9_000, interval: 50 });
  } finally {
    await release();
    await draining;
    await worker.close();
  }
  return { id, inbox };
}
