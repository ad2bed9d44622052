import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// Size budget: each entry bundled from dist as an application's bundler would, minified, then
// gzipped. Issue 4 set the core at 2 KB; issues 7 and 8 added the replay window to verifyEvent,
// the framework-by-framework hints, and the delivery layer (router, dedupe stores, hooks) to the
// core entry. Budgets now: what `verifyEvent` alone pulls in ≤ 3 KB; the whole core entry ≤ 4 KB;
// each adapter ≤ 1.5 KB on top of the whole core.
const dist = resolve(import.meta.dirname, "../dist");
const VERIFY_BUDGET = 3072;
const CORE_BUDGET = 4096;
const ADAPTER_BUDGET = 1536;
// The queue entry also carries the trace context through the job when asked (issue 18, 225 B).
const QUEUE_BUDGET = 1664;

async function gzippedSize(entry: string, only?: string, external: string[] = []): Promise<number> {
  const file = resolve(dist, `${entry}.js`);
  const result = await build({
    ...(only
      ? { stdin: { contents: `export { ${only} } from ${JSON.stringify(file)};`, resolveDir: dist } }
      : { entryPoints: [file] }),
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

  it(`keeps verifyEvent alone, tree-shaken, at or under ${VERIFY_BUDGET} bytes`, async () => {
    const size = await gzippedSize("index", "verifyEvent");
    console.log(`verifyEvent alone: ${size} B gzipped (budget ${VERIFY_BUDGET})`);
    expect(size).toBeLessThanOrEqual(VERIFY_BUDGET);
  });

  it(`keeps the whole core entry at or under ${CORE_BUDGET} bytes minified and gzipped`, async () => {
    const size = await gzippedSize("index");
    console.log(`core: ${size} B gzipped (budget ${CORE_BUDGET})`);
    expect(size).toBeLessThanOrEqual(CORE_BUDGET);
  });

  it.each(["express", "koa", "fetch", "fastify", "hono", "lambda"])(
    `keeps the %s adapter within ${ADAPTER_BUDGET} bytes on top of the core`,
    async (entry) => {
      const [core, total] = await Promise.all([gzippedSize("index"), gzippedSize(entry)]);
      console.log(`${entry}: ${total} B gzipped with the core, ${total - core} B on top (budget ${ADAPTER_BUDGET})`);
      expect(total - core).toBeLessThanOrEqual(ADAPTER_BUDGET);
    },
  );

  // The queue entry takes only WebhookError and a duration parser from the core, not the
  // whole core, so it is measured on its own: what it adds to an app, BullMQ itself aside.
  it(`keeps the bullmq entry within ${QUEUE_BUDGET} bytes, BullMQ aside`, async () => {
    const size = await gzippedSize("bullmq", undefined, ["bullmq"]);
    console.log(`bullmq: ${size} B gzipped with what it takes from the core (budget ${QUEUE_BUDGET})`);
    expect(size).toBeLessThanOrEqual(QUEUE_BUDGET);
  });

  // The otel entry takes nothing from the core at run time (only its types): measured on its
  // own, @opentelemetry/api aside.
  it(`keeps the otel entry within ${ADAPTER_BUDGET} bytes, @opentelemetry/api aside`, async () => {
    const size = await gzippedSize("otel", undefined, ["@opentelemetry/api"]);
    console.log(`otel: ${size} B gzipped (budget ${ADAPTER_BUDGET})`);
    expect(size).toBeLessThanOrEqual(ADAPTER_BUDGET);
  });
});
