import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// Size budget (issue 4): each entry bundled from dist as an application's bundler would, minified,
// then gzipped. The core ≤ 2 KB; each adapter adds ≤ 1.5 KB on top of the core.
const dist = resolve(import.meta.dirname, "../dist");
const CORE_BUDGET = 2048;
const ADAPTER_BUDGET = 1536;

async function gzippedSize(entry: string, external: string[] = []): Promise<number> {
  const result = await build({
    entryPoints: [resolve(dist, `${entry}.js`)],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "neutral",
    write: false,
    logLevel: "silent",
    external,
  });
  return gzipSync((result.outputFiles[0] as { contents: Uint8Array }).contents).byteLength;
}

describe("bundle size", () => {
  it("has a build to measure", () => {
    expect(existsSync(resolve(dist, "index.js")), "dist is not built: run npm run build").toBe(true);
  });

  it(`keeps the core at or under ${CORE_BUDGET} bytes minified and gzipped`, async () => {
    const size = await gzippedSize("index");
    console.log(`core: ${size} B gzipped (budget ${CORE_BUDGET})`);
    expect(size).toBeLessThanOrEqual(CORE_BUDGET);
  });

  it.each(["express", "koa", "fetch"])(
    `keeps the %s adapter within ${ADAPTER_BUDGET} bytes on top of the core`,
    async (entry) => {
      const [core, total] = await Promise.all([gzippedSize("index"), gzippedSize(entry)]);
      console.log(`${entry}: ${total} B gzipped with the core, ${total - core} B on top (budget ${ADAPTER_BUDGET})`);
      expect(total - core).toBeLessThanOrEqual(ADAPTER_BUDGET);
    },
  );

  // The queue entry takes only WebhookError and a duration parser from the core, not the
  // whole core, so it is measured on its own: what it adds to an app, BullMQ itself aside.
  it(`keeps the bullmq entry within ${ADAPTER_BUDGET} bytes, BullMQ aside`, async () => {
    const size = await gzippedSize("bullmq", ["bullmq"]);
    console.log(`bullmq: ${size} B gzipped with what it takes from the core (budget ${ADAPTER_BUDGET})`);
    expect(size).toBeLessThanOrEqual(ADAPTER_BUDGET);
  });
});
