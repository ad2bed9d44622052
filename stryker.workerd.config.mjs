// Stryker for the code that runs only inside workerd (src/cloudflare/dedupe-object.ts): its tests
// (test/cloudflare-dedupe-store.test.ts) bundle it into a Worker that miniflare runs, and switch
// on there the mutant Stryker switched on in the test process (test/support/cloudflare-bundle.ts:
// strykerMutantBanner), and the test hands what workerd covered to Stryker as static coverage
// (reportWorkerdCoverage): with ignoreStatic off, each mutant workerd reached runs the whole file.
//   npx stryker run stryker.workerd.config.mjs --concurrency 1
import { readFileSync } from "node:fs";

const base = JSON.parse(readFileSync(new URL("./stryker.config.json", import.meta.url), "utf8"));

export default {
  ...base,
  mutate: ["src/cloudflare/dedupe-object.ts"],
  testFiles: ["test/cloudflare-dedupe-store.test.ts"],
  ignoreStatic: false,
};
