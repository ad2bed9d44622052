import fc from "fast-check";
import type { WebhookEvent } from "flag-webhooks";
import { createEvent } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { comparePositions, positionOf } from "../../../src/delivery/order/position.js";
import { type FlagPositions, orderEvent } from "../../../src/delivery/order/rule.js";

const update = (id: string, createdAt: string, path = "on", environment = "production") =>
  createEvent("flag.updated", { id, createdAt, environment, data: { changes: [{ path, from: 1, to: 2 }] } });
const whole = (type: "flag.created" | "flag.deleted", id: string, createdAt: string) =>
  createEvent(type, { id, createdAt });

/** The record after `events` are delivered in this order, each written when it has something to write. */
function recordAfter(events: WebhookEvent[]): FlagPositions | undefined {
  let record: FlagPositions | undefined;
  for (const event of events) record = orderEvent(event, record)?.next ?? record;
  return record;
}

describe("positions", () => {
  it("compare createdAt as an instant: Z and +00:00 alike, trailing zeros of the fraction ignored", () => {
    const at = (createdAt: string, id = "a") => positionOf({ createdAt, id });
    expect(at("2026-11-21T09:30:00Z")).toBe(at("2026-11-21T09:30:00.000+00:00"));
    expect(comparePositions(at("2026-11-21T09:30:00Z"), at("2026-11-21T09:30:00.05Z"))).toBeLessThan(0);
    expect(comparePositions(at("2026-11-21T09:30:00.05Z"), at("2026-11-21T09:30:00.5Z"))).toBeLessThan(0);
    expect(comparePositions(at("2026-11-21T09:30:00.999Z"), at("2026-11-21T09:30:01Z"))).toBeLessThan(0);
    expect(comparePositions(at("2026-11-21T09:30:00Z", "b"), at("2026-11-21T09:30:00Z", "a"))).toBeGreaterThan(0);
  });

  it("follow the instants' order and then the ids' code points, for any two events", () => {
    const instant = fc.date({ min: new Date("2000-01-01"), max: new Date("2999-12-31"), noInvalidDate: true });
    fc.assert(
      fc.property(instant, instant, fc.string({ unit: "binary" }), fc.string({ unit: "binary" }), (a, b, x, y) => {
        const order = comparePositions(
          positionOf({ createdAt: a.toISOString(), id: x }),
          positionOf({ createdAt: b.toISOString(), id: y }),
        );
        const expected = a.getTime() - b.getTime() || Buffer.compare(Buffer.from(x), Buffer.from(y));
        expect(Math.sign(order)).toBe(Math.sign(expected));
      }),
      { numRuns: 500 },
    );
  });

  it("refuse a createdAt that names no instant", () => {
    expect(() => positionOf({ createdAt: "yesterday", id: "a" })).toThrow(
      expect.objectContaining({ code: "invalid_payload" }),
    );
  });
});

describe("the rule", () => {
  it("applies a change only after the last applied position of its field; a tie goes to the greater id", () => {
    const applied = recordAfter([update("evt_b", "2026-11-21T09:30:00Z")]);
    expect(orderEvent(update("evt_a", "2026-11-21T09:30:00Z"), applied)).toMatchObject({ stale: true, fresh: [] });
    expect(orderEvent(update("evt_c", "2026-11-21T09:30:00Z"), applied)).toMatchObject({
      stale: false,
      staleChanges: [],
    });
    // Another field, or the same path in another environment, is another key.
    expect(orderEvent(update("evt_a", "2026-11-21T09:29:00Z", "rollout.percent"), applied)?.stale).toBe(false);
    expect(orderEvent(update("evt_a", "2026-11-21T09:29:00Z", "on", "staging"), applied)?.stale).toBe(false);
  });

  it("splits an event's changes into fresh and stale, field by field", () => {
    const applied = recordAfter([update("evt_b", "2026-11-21T09:30:00Z", "on")]);
    const event = createEvent("flag.updated", {
      id: "evt_a",
      createdAt: "2026-11-21T09:29:00Z",
      data: {
        changes: [
          { path: "on", from: 0, to: 1 },
          { path: "rules", from: 0, to: 1 },
        ],
      },
    });
    const decision = orderEvent(event, applied);
    expect(decision?.fresh.map((c) => c.path)).toEqual(["rules"]);
    expect(decision?.staleChanges.map((c) => c.path)).toEqual(["on"]);
  });

  it("makes flag.deleted a tombstone for every field in every environment, and flag.created start again", () => {
    const deleted = recordAfter([
      update("evt_1", "2026-11-21T09:00:00Z", "on", "staging"),
      whole("flag.deleted", "evt_5", "2026-11-21T09:05:00Z"),
    ]);
    expect(deleted).toEqual({ reset: positionOf({ createdAt: "2026-11-21T09:05:00Z", id: "evt_5" }), fields: {} });
    expect(orderEvent(update("evt_3", "2026-11-21T09:03:00Z", "rules", "production"), deleted)?.stale).toBe(true);
    expect(orderEvent(whole("flag.created", "evt_4", "2026-11-21T09:04:00Z"), deleted)?.stale).toBe(true);
    const created = recordAfter([whole("flag.created", "evt_6", "2026-11-21T09:06:00Z")].map((e) => e));
    expect(orderEvent(update("evt_7", "2026-11-21T09:07:00Z"), created)?.stale).toBe(false);
  });

  it("resets only the older fields when a whole-flag event arrives after a newer change", () => {
    const applied = recordAfter([
      update("evt_1", "2026-11-21T09:01:00Z", "on"),
      update("evt_7", "2026-11-21T09:07:00Z", "rules"),
    ]);
    const late = orderEvent(whole("flag.deleted", "evt_5", "2026-11-21T09:05:00Z"), applied);
    expect(late).toMatchObject({ stale: false, resetFields: [{ environment: "production", path: "on" }] });
    expect(Object.keys(late?.next?.fields ?? {})).toEqual(['["production","rules"]']);
  });

  it("orders rollout events whole, per flag and environment", () => {
    const step = (id: string, createdAt: string, environment = "production") =>
      createEvent("rollout.step", { id, createdAt, environment, data: { flag: "new-checkout", percent: 10 } });
    const applied = recordAfter([step("evt_2", "2026-11-21T09:02:00Z")]);
    expect(orderEvent(step("evt_1", "2026-11-21T09:01:00Z"), applied)?.stale).toBe(true);
    expect(orderEvent(step("evt_1", "2026-11-21T09:01:00Z", "staging"), applied)?.stale).toBe(false);
    expect(orderEvent(update("evt_1", "2026-11-21T09:01:00Z"), applied)?.stale).toBe(false);
  });

  it("passes unknown types and events without data.flag untouched", () => {
    expect(orderEvent({ ...createEvent("flag.deleted", { data: {} }), data: {} }, undefined)).toBeUndefined();
    const unknown = { ...createEvent("flag.created"), type: "unknown" as const, originalType: "flag.archived" };
    expect(orderEvent(unknown, undefined)).toBeUndefined();
  });
});
