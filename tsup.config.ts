import { defineConfig } from "tsup";

export default defineConfig({
  entry: {
    index: "src/index.ts",
    express: "src/adapters/express.ts",
    koa: "src/adapters/koa.ts",
    fetch: "src/adapters/fetch.ts",
    bullmq: "src/queue/bullmq.ts",
  },
  format: ["esm", "cjs"],
  dts: true,
  // Shared chunks, in both formats, so every entry point uses one copy of WebhookError.
  splitting: true,
  treeshake: true,
  clean: true,
  target: "es2022",
  platform: "neutral",
  sourcemap: false,
});
