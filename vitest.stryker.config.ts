import { defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.js";

// The tests that exercise src/ directly. Stryker mutates src/, so tests of the built tarball,
// the bundle size, the demo and the other runtimes (which all read dist/) cannot see a mutant;
// for the same reason src/cli/ (tested as the installed binary in test/cli.test.ts) is not mutated.
export default mergeConfig(
  base,
  defineConfig({
    test: {
      include: [
        "test/signature.test.ts",
        "test/events.test.ts",
        "test/adapters.test.ts",
        "test/express.test.ts",
        "test/koa.test.ts",
        "test/fetch.test.ts",
        "test/examples.test.ts",
        "test/properties.test.ts",
        "test/testing.test.ts",
      ],
      typecheck: { enabled: false },
    },
  }),
);
