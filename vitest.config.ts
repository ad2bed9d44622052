import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { entries, specifier } from "./entries.js";

const fromRoot = (path: string) => fileURLToPath(new URL(`./${path}`, import.meta.url));

export default defineConfig({
  resolve: {
    // Examples import the package by name, as users do; in unit tests each name means its source
    // (entries.ts). The built package itself is tested in test/package.test.ts and test/package/.
    alias: entries.map((entry) => ({
      find: new RegExp(`^${specifier(entry).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`),
      replacement: fromRoot(entry.source),
    })),
  },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "./tsconfig.test.json" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
