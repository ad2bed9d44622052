import fc from "fast-check";
import type { WebhookEvent } from "flag-webhooks";
import { createEvent, FlagMirror, inOrder } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { comparePositions, instantOf, positionAt, positionOf } from "../../../src/delivery/order/position.js";
import { type FlagPositions, orderEvent, orderedView } from "../../../src/delivery/order/rule.js";
import { CLOCK_SKEW } from "../../../src/delivery/replay-window.js";

// A flag's record of positions stays bounded: positions older than the store's retention before
// the flag's newest are forgotten. Every event a receiver with maxAge can still accept is newer
// than them, so the state a mirror ends with is the in-order state all the same; an older one
// (a retry past the retention) is stale, never written over a newer value.

const HOUR = 3_600_000;
const RETENTION = 24 * HOUR;
const MAX_AGE = RETENTION - 2 * CLOCK_SKEW; // the longest maxAge a receiver accepts with this retention
const START = Date.parse("2026-11-21T00:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString();

const update = (id: string, at: number, path: string, to: unknown, environment = "production") =>
  createEvent("flag.updated", { id, createdAt: iso(at), environment, data: { changes: [{ path, from: null, to }] } });

/** Delivers `event` to a receiver that keeps `record` (one flag) and mirrors what its handler sees. */
function deliver(state: { record: FlagPositions | undefined; mirror: FlagMirror }, event: WebhookEvent) {
  const decision = orderEvent(event, state.record, RETENTION);
  if (!decision) return;
  if (!(decision.stale && !decision.resetFields)) state.mirror.apply(orderedView(event, decision));
  state.record = decision.next ?? state.record;
}

describe("the positions' retention", () => {
  it("20,000 paths changed long ago are forgotten at the next change: the record keeps only the recent ones", () => {
    const fields: FlagPositions["fields"] = {};
    for (let i = 0; i < 20_000; i++) {
      fields[JSON.stringify(["production", `rules.${i}`])] = positionOf({ createdAt: iso(START + i), id: `evt_${i}` });
    }
    const now = START + 3 * RETENTION;
    const decision = orderEvent(update("evt_new", now, "on", true), { fields }, RETENTION);
    expect(decision?.stale).toBe(false);
    expect(Object.keys(decision?.next?.fields ?? {})).toEqual([JSON.stringify(["production", "on"])]);
    expect(decision?.next?.forgotten).toBeDefined();
    // Without a retention the rule keeps every path, as before.
    expect(Object.keys(orderEvent(update("evt_new", now, "on", true), { fields })?.next?.fields ?? {})).toHaveLength(
      20_001,
    );
  });

  it("an event older than what was forgotten is stale (a retry past the retention cannot undo a newer value)", () => {
    let record: FlagPositions | undefined;
    record = orderEvent(update("evt_a", START, "on", 1), record, RETENTION)?.next;
    record = orderEvent(update("evt_b", START + HOUR, "on", 2), record, RETENTION)?.next;
    record = orderEvent(update("evt_c", START + 2 * RETENTION, "rules", 3), record, RETENTION)?.next;
    expect(Object.keys(record?.fields ?? {})).toEqual([JSON.stringify(["production", "rules"])]);
    // evt_a's retry, between a and b: older than b, which was forgotten; it must not write 1 over 2.
    const retried = orderEvent(update("evt_a2", START + 1, "on", 1), record, RETENTION);
    expect(retried).toMatchObject({ stale: true, fresh: [] });
    expect(retried?.next).toBeUndefined();
  });

  it("a late whole-flag event still resets the forgotten fields: it names the fields it keeps", () => {
    let record: FlagPositions | undefined;
    record = orderEvent(update("evt_old", START, "rules", 1), record, RETENTION)?.next;
    const now = START + 2 * RETENTION;
    record = orderEvent(update("evt_new", now, "on", true), record, RETENTION)?.next;
    const deleted = createEvent("flag.deleted", { id: "evt_del", createdAt: iso(now - HOUR) });
    const decision = orderEvent(deleted, record, RETENTION);
    expect(decision).toMatchObject({
      stale: false,
      resetFields: [],
      keptFields: [{ environment: "production", path: "on" }],
    });
    const mirror = new FlagMirror();
    for (const event of [update("evt_old", START, "rules", 1), update("evt_new", now, "on", true)]) mirror.apply(event);
    mirror.apply(orderedView(deleted, decision as never));
    expect(mirror.snapshot()).toEqual({ [JSON.stringify(["new-checkout", "production", "on"])]: true });
  });

  it("property: events over days, each delivered within maxAge of its createdAt, shuffled with copies: the in-order state, and a record of only the fields changed within the retention", () => {
    const step = fc.record({
      gap: fc.oneof(fc.integer({ min: 0, max: 2 * HOUR }), fc.integer({ min: 0, max: 2 * RETENTION })),
      kind: fc.constantFrom("update", "update", "update", "update", "flag.deleted", "flag.created"),
      path: fc.integer({ min: 0, max: 30 }),
      environment: fc.constantFrom("production", "staging"),
      delay: fc.integer({ min: 0, max: MAX_AGE }),
      copies: fc.integer({ min: 1, max: 2 }),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), (steps) => {
        let at = START;
        const events: WebhookEvent[] = [];
        const deliveries: { when: number; event: WebhookEvent }[] = [];
        steps.forEach((s, i) => {
          at += s.gap;
          const event =
            s.kind === "update"
              ? update(`evt_${i}`, at, `rules.${s.path}`, i, s.environment)
              : createEvent(s.kind as "flag.deleted", { id: `evt_${i}`, createdAt: iso(at) });
          events.push(event);
          for (let c = 0; c < s.copies; c++)
            deliveries.push({ when: at + ((s.delay * (c + 1)) % (MAX_AGE + 1)), event });
        });
        deliveries.sort((a, b) => a.when - b.when);
        const state = { record: undefined as FlagPositions | undefined, mirror: new FlagMirror() };
        for (const { when, event } of deliveries) {
          deliver(state, event);
          // Bounded: every position kept is within the retention before the newest one delivered.
          const newest = Math.max(
            ...deliveries.filter((d) => d.when <= when).map((d) => Date.parse(d.event.createdAt)),
          );
          for (const position of Object.values(state.record?.fields ?? {})) {
            expect(
              comparePositions(position, positionOf({ createdAt: iso(newest - RETENTION), id: "" })),
            ).toBeGreaterThanOrEqual(0);
          }
        }
        const expected = new FlagMirror();
        for (const event of inOrder(events)) expected.apply(event);
        expect(state.mirror.snapshot()).toEqual(expected.snapshot());
      }),
      { numRuns: 1000 },
    );
  });
});

describe("a position's instant", () => {
  it("is read back from a position the way it was written: at an instant, and of an event at it", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Date.UTC(9999, 0) }), fc.string(), (ms, id) => {
        expect(instantOf(positionAt(ms))).toBe(ms);
        const createdAt = new Date(ms).toISOString();
        expect(instantOf(positionOf({ createdAt, id: `evt_${id}` }))).toBe(ms);
      }),
      { numRuns: 1000 },
    );
    expect(instantOf(undefined)).toBeNaN();
  });
});
