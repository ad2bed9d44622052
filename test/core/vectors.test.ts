import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { vectors } from "../support/vectors.js";

describe("known-answer vectors", () => {
  it("are the signatures openssl computes for the stored bodies (scripts/make-vectors.mjs --check)", () => {
    const script = resolve(import.meta.dirname, "../../scripts/make-vectors.mjs");
    const out = execFileSync(process.execPath, [script, "--check"], { encoding: "utf8" });
    expect(out).toContain(`${vectors.length} vectors match openssl`);
  });

  it("cover the cases the suites rely on", () => {
    expect(vectors.map((v) => v.name)).toEqual(
      expect.arrayContaining(["flag-updated-compact", "invalid-utf8-bytes", "non-ascii-secret", "one-mib-of-a"]),
    );
  });
});
