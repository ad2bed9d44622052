import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { entries, specifier } from "./entries.js";

const fromRoot = (path: string) => fileURLToPath(new URL(`./${path}`, import.meta.url));

export default defineConfig({
  resolve: {
    // Examples import the package by name, as users do; in unit tests each name means its source
    // (entries.ts). The built package itself is tested in test/package/.
    alias: entries.map((entry) => ({
      find: new RegExp(`^${specifier(entry).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`),
      replacement: fromRoot(entry.source),
    })),
  },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    // The type tests (test/**/*.test-d.ts) are checked by `tsc -p tsconfig.test.json`, a step of
    // npm test before this one: a wrong expectTypeOf or an unused @ts-expect-error is a compile
    // error there. vitest's typecheck mode would run the same compiler over the same files again
    // (45 s of CPU on these 2-core machines) only to count them as tests.
    typecheck: { enabled: false },
    // Three files at a time: most of a test's time is spent waiting on servers, child processes and
    // sockets, not on the CPU, and vitest's default (CPUs − 1) runs one file at a time on the 2-core
    // machines CI uses (measured there: 172–198 s for the suite instead of 340–455 s).
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
