import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// Size budgets: each entry bundled from dist as an application's bundler would, minified, then
// gzipped. What `verifyEvent` alone pulls in (signature, event parser, replay window); the whole
// core entry (the router, the dedupe stores, the hooks); and each adapter on top of the whole core,
// which carries the receiver they share (the claim settled with the answer actually sent, the
// fail-closed bounds, the telemetry hook; Node adapters also watch the wire and share one body
// timer per timeout). Measured when these were set: verifyEvent 3.25 KB, the core 4.58 KB,
// adapters 2.1 (fetch) to 2.77 KB (Fastify) on top.
const dist = resolve(import.meta.dirname, "../../dist");
const VERIFY_BUDGET = 3456;
const CORE_BUDGET = 4736;
const ADAPTER_BUDGET = 2944;
// The queue entry also carries the trace context through the job when asked (225 B of it).
const QUEUE_BUDGET = 2560;
// A store entry holds the store and its table or object, not glue: measured alone, its
// SDK aside, as the bullmq entry is. DynamoDB's is about 1.8 KB, a third of it the duration parser
// and the WebhookError class that parser's module brings. The cloudflare entry is measured by what
// a Worker imports from it: the Durable Object and its store; the queue hand-off, whose consumer
// carries the event parser (the whole entry is about 3.7 KB).
const STORE_BUDGET = 2048;
// The Postgres inbox (server-side, opt-in): its SQL, four kinds of client, the transaction logic.
const POSTGRES_BUDGET = 3584;
// The otel entry: spans and metrics over @opentelemetry/api, which stays the user's.
const OTEL_BUDGET = 1536;

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

  it.each(["index", "express", "koa", "fetch", "fastify", "hono", "lambda", "cloudflare"])(
    "keeps the %s entry free of every SDK and package: all it bundles is its own code",
    async (entry) => {
      const result = await build({
        entryPoints: [resolve(dist, `${entry}.js`)],
        bundle: true,
        format: "esm",
        platform: "neutral",
        write: false,
        metafile: true,
        logLevel: "silent",
        // Type-only framework imports are erased; a runtime import of any package fails to resolve
        // here (platform neutral) or shows among the inputs.
      });
      const inputs = Object.keys(result.metafile?.inputs ?? {});
      expect(inputs.length).toBeGreaterThan(0);
      expect(inputs.filter((input) => !input.startsWith("dist/") || input.includes("node_modules"))).toEqual([]);
    },
  );

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

  // The queue entry takes WebhookError, a duration parser, the scope check and the event validator
  // (processEvents checks each job with the receiver's rules) from the core, not the
  // whole core, so it is measured on its own: what it adds to an app, BullMQ itself aside.
  it(`keeps the bullmq entry within ${QUEUE_BUDGET} bytes, BullMQ aside`, async () => {
    const size = await gzippedSize("bullmq", undefined, ["bullmq"]);
    console.log(`bullmq: ${size} B gzipped with what it takes from the core (budget ${QUEUE_BUDGET})`);
    expect(size).toBeLessThanOrEqual(QUEUE_BUDGET);
  });

  // The serverless stores likewise take only a few core helpers, and their SDK is the user's.
  it(`keeps the dynamodb entry within ${STORE_BUDGET} bytes, the AWS SDK aside`, async () => {
    const size = await gzippedSize("dynamodb", undefined, ["@aws-sdk/client-dynamodb"]);
    console.log(`dynamodb: ${size} B gzipped with what it takes from the core (budget ${STORE_BUDGET})`);
    expect(size).toBeLessThanOrEqual(STORE_BUDGET);
  });

  it.each([
    ["DedupeObject, DurableObjectDedupeStore", STORE_BUDGET],
    // The consumer carries the event parser, with its checks of dates and ids (2.66 KB measured).
    ["enqueueTo, consumeEvents", STORE_BUDGET + 768],
  ])(`keeps %s from the cloudflare entry within %i bytes`, async (names, budget) => {
    const size = await gzippedSize("cloudflare", names);
    console.log(`cloudflare { ${names} }: ${size} B gzipped with what it takes from the core (budget ${budget})`);
    expect(size).toBeLessThanOrEqual(budget);
  });

  // The Postgres inbox, like the queue entry, takes only WebhookError and a duration parser from
  // the core, and imports no Postgres client: measured on its own.
  it(`keeps the postgres entry within ${POSTGRES_BUDGET} bytes`, async () => {
    const size = await gzippedSize("postgres");
    console.log(`postgres: ${size} B gzipped with what it takes from the core (budget ${POSTGRES_BUDGET})`);
    expect(size).toBeLessThanOrEqual(POSTGRES_BUDGET);
  });

  // The otel entry takes nothing from the core at run time (only its types): measured on its
  // own, @opentelemetry/api aside.
  it(`keeps the otel entry within ${OTEL_BUDGET} bytes, @opentelemetry/api aside`, async () => {
    const size = await gzippedSize("otel", undefined, ["@opentelemetry/api"]);
    console.log(`otel: ${size} B gzipped (budget ${OTEL_BUDGET})`);
    expect(size).toBeLessThanOrEqual(OTEL_BUDGET);
  });
});
