import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";
import { entries, specifier } from "./entries.js";

/** The test files that leave process-wide state behind them: each runs in a process of its own (below). */
const ISOLATED = [
  "test/adapters/fastify.test.ts",
  "test/adapters/fetch.test.ts",
  "test/adapters/nestjs.test.ts",
  // Counts and emits the process's SIGINT and SIGTERM listeners.
  "test/cli/dev.test.ts",
  "test/docs/examples.test.ts",
  "test/emulator/deliveries.test.ts",
  "test/emulator/server.test.ts",
  // OpenTelemetry's global tracer, meter and context providers, set by the SDK these start.
  "test/otel/**",
  "test/queues/bullmq.test.ts",
  "test/queues/cloudflare.test.ts",
  "test/receiver/body-deadlines.test.ts",
  "test/receiver/claim.test.ts",
  "test/receiver/hooks.test.ts",
  "test/receiver/options.test.ts",
  "test/receiver/web-crypto.test.ts",
  "test/store-contract/enlist.test.ts",
  "test/stores/dynamodb.test.ts",
  "test/stores/redis/receivers.test.ts",
];

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
    // Most files run in workers that are kept from file to file, with the modules they loaded:
    // a new process per file, vitest's default, cost about 0.25 s of CPU a file (vitest's runtime
    // and the modules loaded again), some 50 s of the 2-core machines' CPU over the suite. The files
    // of ISOLATED change what the next file in their worker would see (process.env, process
    // listeners, spies on globals or console, fake timers, the process-wide registry of
    // deliveries): each of those still gets a process of its own.
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          isolate: false,
          include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...ISOLATED],
          setupFiles: ["test/support/shared-worker.ts"],
        },
      },
      { extends: true, test: { name: "isolated", include: ISOLATED } },
    ],
  },
});
