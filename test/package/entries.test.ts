import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { budgetFor, budgetsOf, buildEntries, command, distName, entries, specifier } from "../../entries.js";
import { packageFields, testPaths } from "../../scripts/entries.js";
import tsupConfig from "../../tsup.config.js";
import vitestConfig from "../../vitest.config.js";
import strykerConfig from "../../vitest.stryker.config.js";
import { bundleWorker } from "../support/cloudflare-bundle.js";

// entries.ts is the one list of the package's entries: everything that names an entry must agree
// with it. Each failure says what to run or change.
const root = resolve(import.meta.dirname, "../..");
const FIX = "package.json disagrees with entries.ts: run `npm run entries`";

describe("the list of entries (entries.ts)", () => {
  it("starts with flag-webhooks itself and names each entry once, each from a source that exists", () => {
    expect(entries[0]?.name).toBe(".");
    const names = entries.map((entry) => entry.name);
    expect(new Set(names).size).toBe(names.length);
    for (const entry of entries) {
      expect(entry.name, "a subpath: lowercase words and slashes").toMatch(/^(\.|[a-z0-9-]+(\/[a-z0-9-]+)*)$/);
      const found = existsSync(resolve(root, entry.source));
      expect(found, `${entry.source} (entry ${entry.name}) does not exist`).toBe(true);
    }
    expect(existsSync(resolve(root, command.source)), `${command.source} (the command) does not exist`).toBe(true);
  });

  it("leaves external only packages that are the entry's own optional peers", () => {
    // A package the entry imports at run time but the user was never told to install would fail
    // to load in their app.
    for (const entry of entries) {
      const peers = Object.keys(entry.peers ?? {});
      expect(
        (entry.external ?? []).filter((name) => !peers.includes(name)),
        `entry ${entry.name}: add each external package to its peers`,
      ).toEqual([]);
    }
  });

  it("gives each entry size budgets that say what they protect, or says why it has none", async () => {
    for (const entry of entries) {
      if ("unbudgeted" in entry.size) {
        expect(entry.size.unbudgeted.length, `entry ${entry.name}: say why it has no budget`).toBeGreaterThan(10);
        continue;
      }
      expect(entry.size.length, `entry ${entry.name}: give it a budget, or say why it has none`).toBeGreaterThan(0);
      for (const budget of budgetsOf(entry)) {
        expect(budget.protects.length, `entry ${entry.name}: say what its budget protects`).toBeGreaterThan(10);
        expect(Number.isInteger(budget.measured) && budget.measured > 0).toBe(true);
        // The rule: 5% of room above what was measured, rounded up to the next multiple of 64 B.
        const budgeted = budgetFor(budget.measured);
        expect(budgeted % 64).toBe(0);
        expect(budgeted * 100).toBeGreaterThanOrEqual(budget.measured * 105);
        expect(budgeted * 100).toBeLessThan(budget.measured * 105 + 64 * 100);
        // A budget on some names only counts those names: each must be one the entry exports.
        const exported = Object.keys(await import(specifier(entry)));
        expect((budget.names ?? []).filter((name) => !exported.includes(name))).toEqual([]);
      }
    }
  });
});

describe("files made from the list", () => {
  it("package.json: exports, typesVersions, main, module, types, bin, peers", () => {
    const pkg = JSON.parse(readFileSync(resolve(root, "package.json"), "utf8")) as Record<string, unknown>;
    const fields = packageFields();
    const current = Object.fromEntries(Object.keys(fields).map((key) => [key, pkg[key]]));
    expect(current, FIX).toEqual(fields);
    // Key order matters to a reader of exports, and is what the script writes.
    expect(Object.keys(pkg.exports as object), FIX).toEqual(Object.keys(fields.exports as object));
  });

  it("tsconfig.test.json: the paths that map each public name to its source", () => {
    const { config, error } = ts.parseConfigFileTextToJson(
      "tsconfig.test.json",
      readFileSync(resolve(root, "tsconfig.test.json"), "utf8"),
    );
    expect(error).toBeUndefined();
    expect(config.compilerOptions.paths, "tsconfig.test.json disagrees with entries.ts: run `npm run entries`").toEqual(
      testPaths(),
    );
  });
});

describe("files that read the list", () => {
  it("tsup.config.ts builds every entry, and the command apart", () => {
    const [library, cli] = tsupConfig as { entry?: unknown }[];
    expect(library?.entry, "tsup.config.ts must build `buildEntries()` from entries.ts").toEqual(buildEntries());
    expect(Object.keys(buildEntries())).toEqual(entries.map(distName));
    expect(cli?.entry, "tsup.config.ts must build the command from entries.ts").toEqual({
      [command.file]: command.source,
    });
  });

  it("vitest.config.ts maps each public name to the entry's source, and no other flag-webhooks name", async () => {
    for (const entry of entries) {
      // The module the test runner loads for the public name is the source module itself.
      expect(await import(specifier(entry)), `vitest.config.ts: ${specifier(entry)} is not its source`).toBe(
        await import(resolve(root, entry.source)),
      );
    }
    const aliases = vitestConfig.resolve?.alias as unknown as { find: RegExp }[];
    expect(aliases.filter(({ find }) => find.test("flag-webhooks/not-an-entry"))).toEqual([]);
    expect(aliases).toHaveLength(entries.length);
  });

  it("vitest.stryker.config.ts resolves the names as the test runner does", () => {
    expect(strykerConfig.resolve).toBe(vitestConfig.resolve);
  });

  it("the Worker bundles of the Cloudflare tests resolve every entry a Worker can import to its source", async () => {
    // Entries for Web APIs with no package of their own; the rest need Node or an SDK.
    const workerEntries = entries.filter((entry) => (entry.platform ?? "neutral") === "neutral" && !entry.external);
    const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-entries-"));
    try {
      const worker = join(dir, "worker.js");
      writeFileSync(
        worker,
        workerEntries.map((entry, i) => `export * as e${i} from ${JSON.stringify(specifier(entry))};`).join("\n"),
      );
      const code = await bundleWorker(worker);
      // esbuild marks each source it bundles with a comment holding its path.
      for (const entry of workerEntries) expect(code).toContain(`// ${entry.source}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
