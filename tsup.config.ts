import { cpSync, readFileSync } from "node:fs";
import { defineConfig } from "tsup";

const { version } = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")) as { version: string };

export default defineConfig([
  {
    entry: {
      index: "src/index.ts",
      express: "src/adapters/express.ts",
      koa: "src/adapters/koa.ts",
      fetch: "src/adapters/fetch.ts",
      fastify: "src/adapters/fastify.ts",
      hono: "src/adapters/hono.ts",
      lambda: "src/adapters/lambda.ts",
      bullmq: "src/queues/bullmq.ts",
      dynamodb: "src/stores/dynamodb.ts",
      cloudflare: "src/cloudflare.ts",
      postgres: "src/stores/postgres/index.ts",
      otel: "src/otel/index.ts",
      testing: "src/testing/index.ts",
      emulator: "src/emulator/index.ts",
    },
    format: ["esm", "cjs"],
    dts: true,
    // Shared chunks, in both formats, so every entry point uses one copy of WebhookError.
    splitting: true,
    treeshake: true,
    // Both builds write dist/ at the same time: this one must not delete the command's file.
    clean: ["!cli.js"],
    target: "es2022",
    platform: "neutral",
    sourcemap: false,
    // The emulator's page is static files served as they are: no build step, shipped beside the bundles.
    onSuccess: async () => {
      cpSync("src/emulator/page", "dist/emulator-page", { recursive: true });
    },
  },
  {
    // The `flag-webhooks` command (package.json "bin"): one self-contained ES module for Node,
    // built apart so that nothing of the command reaches the library's entries or chunks.
    entry: { cli: "src/cli/bin.ts" },
    format: ["esm"],
    dts: false,
    splitting: false,
    treeshake: true,
    clean: false,
    target: "node20",
    platform: "node",
    sourcemap: false,
    banner: { js: "#!/usr/bin/env node" },
    define: { __FLAG_WEBHOOKS_VERSION__: JSON.stringify(version) },
  },
]);
