import { cpSync, readFileSync } from "node:fs";
import { defineConfig } from "tsup";
import { buildEntries, command } from "./entries.js";

const { version } = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")) as { version: string };

export default defineConfig([
  {
    // Every library entry (entries.ts), each to dist/<name>.js, .cjs, .d.ts and .d.cts.
    entry: buildEntries(),
    format: ["esm", "cjs"],
    dts: true,
    // Shared chunks, in both formats, so every entry point uses one copy of WebhookError.
    splitting: true,
    treeshake: true,
    // Both builds write dist/ at the same time: this one must not delete the command's file.
    clean: [`!${command.file}.js`],
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
    entry: { [command.file]: command.source },
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
