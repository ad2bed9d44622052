// Stryker for the code that runs only inside workerd (src/stores/durable-object/object.ts and
// src/queues/cloudflare.ts): their tests (test/stores/durable-object.test.ts and
// test/queues/cloudflare.test.ts) bundle it into a Worker that miniflare runs, and switch on there the
// mutant Stryker switched on in the test process (test/support/cloudflare-bundle.ts:
// strykerMutantBanner), and the test hands what workerd covered to Stryker as static coverage
// (reportWorkerdCoverage): with ignoreStatic off, each mutant workerd reached runs the whole file.
//   npx stryker run stryker.workerd.config.mjs --concurrency 1
// One file (each mutant then runs only the test file named):
//   npx stryker run stryker.workerd.config.mjs --concurrency 1 --mutate src/queues/cloudflare.ts --testFiles test/queues/cloudflare.test.ts
import { readFileSync } from "node:fs";

const base = JSON.parse(readFileSync(new URL("./stryker.config.json", import.meta.url), "utf8"));
const testFiles = ["test/stores/durable-object.test.ts", "test/queues/cloudflare.test.ts"];

// vitest.stryker.config.ts leaves test/queues/cloudflare.test.ts out of whole-suite runs; a file named in
// STRYKER_TESTS runs all the same (the test runner processes inherit this environment).
process.env.STRYKER_TESTS ??= testFiles.join(",");

export default {
  ...base,
  mutate: ["src/stores/durable-object/object.ts", "src/queues/cloudflare.ts"],
  testFiles,
  ignoreStatic: false,
};
