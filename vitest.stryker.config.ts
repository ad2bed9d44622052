import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

// The configuration Stryker runs (`npm run mutation`). Stryker mutates src/ in its sandbox and
// switches mutants inside the test process, so only tests that import src/ in-process can kill a
// mutant. Left out, and why:
// - tests of dist/ (the packed package, its size and export names, the demo, the CLI binary and
//   `dev` command, other runtimes), the check that every file naming an entry agrees with
//   entries.ts, and
//   the Cloudflare test (an esbuild bundle run in workerd): they never load the mutated src/
//   (test/stores/durable-object.test.ts, included, runs DurableObjectDedupeStore from src/ in
//   Node over real namespaces; the Durable Object itself is measured by stryker.workerd.config.mjs);
// - the Postgres crash test: its receivers are child processes, which see no active mutant;
// - the README/docs test: it type-checks snippets with tsc, which says nothing about behaviour;
// - type tests (*.test-d.ts): types are erased before a mutant runs.
// Stryker's vitest runner keeps `related: true`, so for each file it mutates it runs only the
// test files that import it (directly or not), and with `coverageAnalysis: "perTest"` each mutant
// runs only the tests that reached it.
// `include` is set here, not merged: vitest's mergeConfig concatenates arrays, so merging would
// add the base config's `test/**/*.test.ts` back.
// STRYKER_TESTS (comma-separated test files or globs) narrows the run to the unit tests of the
// files being mutated. Needed for static mutants (module-level code, and code a test file runs
// while it loads or in beforeAll): Stryker cannot tell which test reaches them, so each runs every
// included test, and with the whole suite (~1,400 tests, 80 s a run) a file such as src/errors.ts
// takes hours. A narrower set gives a lower bound of the score: whatever it kills, the suite kills.
//   STRYKER_TESTS=test/core/signature.test.ts,test/core/events.test.ts npx stryker run --concurrency 1 --mutate src/events.ts
// globalSetup starts ONE PostgreSQL for the whole run (when installed), which the Postgres tests
// get through inject("postgresUrl"), each run of a file in a new database of its own: without it
// every mutant's run of test/stores/postgres/inbox.test.ts would start a server (5-9 s each). The normal
// suite (vitest.config.ts) has none: there each Postgres test file starts its own server.
const only = process.env.STRYKER_TESTS?.split(",")
  .map((pattern) => pattern.trim())
  .filter((pattern) => pattern !== "");
const excluded = [
  "test/cli/installed.test.ts",
  "test/docs/demo.test.ts",
  "test/package/**",
  "test/runtimes/runtimes.test.ts",
  "test/docs/self-contained.test.ts",
  "test/queues/cloudflare.test.ts",
  "test/stores/postgres/crash.test.ts",
  "test/docs/readme.test.ts",
  "test/cli/dev-process.test.ts",
  "test/emulator/express.test.ts",
];

// Without the base config's projects (its files in kept workers, a few in processes of their
// own): Stryker's runner chooses the test files itself and keeps one process for them.
const { projects: _projects, ...baseTest } = base.test ?? {};

export default defineConfig({
  resolve: base.resolve,
  test: {
    ...baseTest,
    include: only?.length ? only : ["test/**/*.test.ts", "examples/**/*.test.ts"],
    // A file STRYKER_TESTS names runs even when the whole-suite run leaves it out (the workerd run
    // of test/queues/cloudflare.test.ts: stryker.workerd.config.mjs).
    exclude: [...excluded.filter((file) => !only?.includes(file)), "**/node_modules/**"],
    typecheck: { enabled: false },
    globalSetup: ["test/support/postgres-global-setup.ts"],
  },
});
