import { describe, expect, it } from "vitest";
import { attemptsOf, DEFAULT_RETRIES, nextAttemptAt, scheduleOf } from "../../../src/stores/work/schedule.js";

// The one backoff rule of keep-then-work: its default (justified in docs/inbox-worker.md), the
// jitter's bounds, the attempt after which an event is parked, and the options it refuses.

describe("the retry schedule", () => {
  it("by default gives 10 attempts over about 2.9 days, the first retry after 10 s", () => {
    const schedule = scheduleOf({ jitter: 0 });
    expect(attemptsOf(schedule)).toBe(10);
    let at = 0;
    for (let attempt = 1; attempt < 10; attempt++) at = nextAttemptAt(schedule, attempt, at) as number;
    expect(at / 3_600_000).toBeCloseTo(68.6, 1);
    expect(nextAttemptAt(schedule, 1, 0)).toBe(10_000);
    expect(nextAttemptAt(schedule, 10, 0)).toBeUndefined();
    expect(DEFAULT_RETRIES).toHaveLength(9);
  });

  it("draws each delay within ± the jitter of it, from the random source given", () => {
    const at = (random: number) =>
      nextAttemptAt(scheduleOf({ retries: ["100s"], jitter: 0.2, random: () => random }), 1, 0);
    expect(at(0)).toBe(80_000);
    expect(at(0.5)).toBe(100_000);
    expect(at(0.999_999)).toBeCloseTo(120_000, -1);
    expect(nextAttemptAt(scheduleOf({ retries: ["100s"], jitter: 0.2, random: () => 0 }), 2, 0)).toBeUndefined();
  });

  it("with no retries, parks after the first failed attempt", () => {
    const schedule = scheduleOf({ retries: [] });
    expect(attemptsOf(schedule)).toBe(1);
    expect(nextAttemptAt(schedule, 1, 0)).toBeUndefined();
  });

  it("refuses what is not a schedule, naming the option", () => {
    expect(() => scheduleOf({ retries: "1m" as never })).toThrow(/option "retries"/);
    expect(() => scheduleOf({ retries: ["1m", "soon"] })).toThrow(/option "retries\[1\]"/);
    expect(() => scheduleOf({ jitter: 1 })).toThrow(/option "jitter"/);
    expect(() => scheduleOf({ jitter: -0.1 })).toThrow(/option "jitter"/);
    expect(() => scheduleOf({ random: 3 as never })).toThrow(/option "random"/);
  });
});
