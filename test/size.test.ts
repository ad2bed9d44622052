import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { type Budget, budgetFor, budgetsOf, distName, type Entry, entries } from "../entries.js";

// What each entry costs an application: the built entry bundled from dist/ as an application's
// bundler would (esbuild, minified), then gzipped, its external packages (its SDK) aside. The
// budgets, what each protects and the one rule they follow are in entries.ts.
const dist = resolve(import.meta.dirname, "../dist");
const core = entries.find((entry) => entry.name === ".") as Entry;
const budgeted = entries.flatMap((entry) => budgetsOf(entry).map((budget) => ({ entry, budget })));

/** An app's bundle of `entry` (only `names` of it, tree-shaken, when given), minified and gzipped. */
async function gzippedSize(entry: Entry, names?: readonly string[]): Promise<number> {
  const file = resolve(dist, `${distName(entry)}.js`);
  const result = await build({
    ...(names
      ? { stdin: { contents: `export { ${names.join(", ")} } from ${JSON.stringify(file)};`, resolveDir: dist } }
      : { entryPoints: [file] }),
    bundle: true,
    minify: true,
    format: "esm",
    platform: entry.platform ?? "neutral",
    write: false,
    logLevel: "silent",
    external: [...(entry.external ?? [])],
  });
  return gzipSync((result.outputFiles[0] as { contents: Uint8Array }).contents).byteLength;
}

let coreSize: Promise<number> | undefined;

/** The bytes a budget counts: the bundle, or what the entry adds to an app that has the core. */
async function measure(entry: Entry, budget: Budget): Promise<number> {
  const size = await gzippedSize(entry, budget.names);
  if (budget.measure === "bundle") return size;
  coreSize ??= gzippedSize(core);
  return size - (await coreSize);
}

describe("bundle size", () => {
  it("has a build to measure", () => {
    expect(existsSync(resolve(dist, "index.js")), "dist is not built: run npx tsup").toBe(true);
  });

  it.each(entries.map((entry) => [distName(entry), entry] as const))(
    "keeps the %s entry free of every package but its external ones: all else it bundles is its own code",
    async (_, entry) => {
      const result = await build({
        entryPoints: [resolve(dist, `${distName(entry)}.js`)],
        bundle: true,
        format: "esm",
        platform: entry.platform ?? "neutral",
        write: false,
        metafile: true,
        logLevel: "silent",
        external: [...(entry.external ?? [])],
        // Type-only framework imports are erased; a runtime import of any other package fails to
        // resolve here (platform neutral) or shows among the inputs.
      });
      const inputs = Object.keys(result.metafile?.inputs ?? {});
      expect(inputs.length).toBeGreaterThan(0);
      expect(inputs.filter((input) => !input.startsWith("dist/") || input.includes("node_modules"))).toEqual([]);
    },
  );

  it.each(budgeted.map(({ entry, budget }) => [distName(entry), budget.protects, entry, budget] as const))(
    "keeps the %s entry within its budget: %s",
    async (name, _, entry, budget) => {
      const size = await measure(entry, budget);
      const limit = budgetFor(budget.measured);
      const what = `${name}${budget.names ? ` { ${budget.names.join(", ")} }` : ""}`;
      const how = budget.measure === "bundle" ? "gzipped" : "gzipped on top of the core";
      console.log(`${what}: ${size} B ${how} (budget ${limit}, from ${budget.measured} measured when set)`);
      expect(
        size,
        `${what} is ${size} B ${how}, over its budget of ${limit} B: if the growth is worth it, set measured: ${size} in entries.ts`,
      ).toBeLessThanOrEqual(limit);
    },
  );
});
