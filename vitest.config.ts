import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const src = (path: string) => fileURLToPath(new URL(`./src/${path}`, import.meta.url));

export default defineConfig({
  resolve: {
    // Examples import the package by name, as users do; in unit tests that name means src/.
    // The packed package itself is tested in test/package/.
    alias: [
      { find: /^flag-webhooks$/, replacement: src("index.ts") },
      { find: /^flag-webhooks\/testing$/, replacement: src("testing/index.ts") },
      { find: /^flag-webhooks\/emulator$/, replacement: src("emulator/index.ts") },
      { find: /^flag-webhooks\/(express|koa|fetch|fastify|hono|lambda)$/, replacement: src("adapters/$1.ts") },
      { find: /^flag-webhooks\/bullmq$/, replacement: src("queue/bullmq.ts") },
      { find: /^flag-webhooks\/dynamodb$/, replacement: src("dynamodb/index.ts") },
      { find: /^flag-webhooks\/cloudflare$/, replacement: src("cloudflare/index.ts") },
      { find: /^flag-webhooks\/postgres$/, replacement: src("postgres/inbox.ts") },
      { find: /^flag-webhooks\/otel$/, replacement: src("otel/index.ts") },
    ],
  },
  test: {
    include: ["test/**/*.test.ts", "examples/**/*.test.ts"],
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "./tsconfig.test.json" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
