import { createEvent, FlagMirror, flagHistory, inOrder, shuffledCopy } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";

describe("the test kit for ordered delivery", () => {
  it("makes a history of related events for one flag, created first, with some equal createdAts, in position order", () => {
    const history = flagHistory({ flag: "dark-mode", length: 200, seed: 3 });
    expect(history).toHaveLength(200);
    expect(history[0]?.type).toBe("flag.created");
    expect(new Set(history.map((event) => (event.data as { flag: string }).flag))).toEqual(new Set(["dark-mode"]));
    expect(inOrder(history)).toEqual(history);
    const createdAts = history.map((event) => event.createdAt);
    expect(new Set(createdAts).size).toBeLessThan(createdAts.length);
    // Every deletion is followed by a creation, as the service does.
    history.forEach((event, index) => {
      if (event.type === "flag.deleted") expect(history[index + 1]?.type ?? "flag.created").toBe("flag.created");
    });
    expect(flagHistory({ seed: 3, start: "2026-11-21T09:00:00Z" })).toEqual(
      flagHistory({ seed: 3, start: "2026-11-21T09:00:00Z" }),
    );
  });

  it("delivers a shuffled copy with duplicates, every event at least once", () => {
    const history = flagHistory({ length: 100, seed: 5 });
    const copy = shuffledCopy(history, { seed: 5, duplicates: 0.5 });
    expect(new Set(copy)).toEqual(new Set(history));
    expect(copy.length).toBeGreaterThan(history.length);
    expect(copy.slice(0, history.length)).not.toEqual(history);
  });

  it("mirrors state: updates set fields, a whole-flag event clears the flag but for its keptFields", () => {
    const mirror = new FlagMirror();
    const set = (path: string, to: unknown) =>
      mirror.apply(
        createEvent("flag.updated", { environment: "staging", data: { changes: [{ path, from: null, to }] } }),
      );
    set("on", true);
    set("rules", 1);
    const key = (path: string) => JSON.stringify(["new-checkout", "staging", path]);
    expect(mirror.snapshot()).toEqual({ [key("on")]: true, [key("rules")]: 1 });
    set("targets", 2);
    // resetFields may leave out fields changed before the retention: keptFields is what stays.
    const kept = {
      resetFields: [{ environment: "staging", path: "on" }],
      keptFields: [{ environment: "staging", path: "rules" }],
    };
    mirror.apply({ ...createEvent("flag.deleted"), ...kept });
    expect(mirror.snapshot()).toEqual({ [key("rules")]: 1 });
    mirror.apply(createEvent("flag.created"));
    expect(mirror.snapshot()).toEqual({});
  });
});
