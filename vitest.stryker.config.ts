import { defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.js";

// The tests that exercise src/ directly. Stryker mutates src/, so tests of the built tarball,
// the bundle size, the demo and the other runtimes (which all read dist/) cannot see a mutant.
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
      ],
      typecheck: { enabled: false },
    },
  }),
);
