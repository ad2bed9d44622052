import { describe, expect, it } from "vitest";
import { busyTimeoutOf } from "../../../src/stores/sqlite/busy-timeout.js";

// The app's busy_timeout as each driver's row of `pragma busy_timeout` gives it: SQLite names the
// column "timeout", a driver that reads rows by position (or names them otherwise) gives its first
// value, and a driver that gives no row at all leaves the app's value at SQLite's default, 0.

describe("busyTimeoutOf", () => {
  it("reads the column named timeout, else the row's first value, else 0", () => {
    expect(busyTimeoutOf({ timeout: 1234 })).toBe(1234);
    expect(busyTimeoutOf({ timeout: 0 })).toBe(0);
    expect(busyTimeoutOf({ busy_timeout: 250 })).toBe(250);
    expect(busyTimeoutOf({ 0: 75 })).toBe(75);
    expect(busyTimeoutOf(undefined)).toBe(0);
  });
});
