import { describe, expect, it } from "vitest";
import { RecentIds } from "../../../src/stores/postgres/recent-ids.js";

describe("RecentIds: the ids an inbox met lately", () => {
  it("holds at most its size, forgetting the id met longest ago; meeting one again makes it the newest", () => {
    const met = new RecentIds(2);
    met.add("a");
    met.add("b");
    met.add("a");
    met.add("c");
    expect(["a", "b", "c"].map((id) => met.has(id))).toEqual([true, false, true]);
  });

  it("holds a thousand by default", () => {
    const met = new RecentIds();
    for (let i = 0; i <= 1000; i++) met.add(`evt_${i}`);
    expect([met.has("evt_0"), met.has("evt_1"), met.has("evt_1000")]).toEqual([false, true, true]);
  });
});
