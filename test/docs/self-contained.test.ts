import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

// A user clones this repository alone, so nothing the project runs may read a path
// outside its clone (the workspace's shared folder sits beside it only on our machines).
const root = resolve(import.meta.dirname, "../..");
// Built from pieces, so that this file does not name them itself. The machine's root folder counts
// only as an absolute path (not after a word or a dot: src/stores/work/ is the package's own).
const outside = new RegExp(
  [`\\.\\./${"shared"}`, ["shared", "vectors"].join("/"), `(?<![\\w.])${["", "work", ""].join("/")}`].join("|"),
);

describe("the repository stands alone", () => {
  it("has no file that tests, scripts, benches, examples or CI run reading a path outside the clone", () => {
    const files = execFileSync(
      "git",
      ["ls-files", "src", "test", "scripts", "bench", "examples", ".ci", "*.json", "*.ts"],
      {
        cwd: root,
        encoding: "utf8",
      },
    )
      .split("\n")
      .filter((file) => file && !file.endsWith("package-lock.json"));
    expect(files.length).toBeGreaterThan(20);
    const offenders = files.filter((file) => outside.test(readFileSync(resolve(root, file), "utf8")));
    expect(offenders).toEqual([]);
  });
});
