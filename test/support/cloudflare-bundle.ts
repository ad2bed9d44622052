import { resolve } from "node:path";
import { type BuildOptions, build } from "esbuild";
import { Miniflare, type MiniflareOptions, type SharedOptions, type WorkerOptions } from "miniflare";
import { fromSource } from "./node-bundle.js";

// Bundles the Cloudflare test fixtures (test/fixtures/cloudflare/) from src/ as wrangler would,
// and starts them in workerd through miniflare, with one compatibility date, for the tests that
// run them.

const root = resolve(import.meta.dirname, "../..");

/**
 * Bundles a Worker with esbuild as wrangler does (ESM, the workerd/worker/browser conditions),
 * with the entry, plugins and banner of `options`; every Worker a test runs is built this way.
 */
export async function bundleAsWrangler(options: BuildOptions): Promise<string> {
  const result = await build({
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["browser", "module", "main"],
    logLevel: "silent",
    ...options,
  });
  const code = result.outputFiles?.[0]?.text;
  if (!code) throw new Error("esbuild produced no bundle");
  return code;
}

/**
 * Bundles a Worker (a path from the repository's root) as wrangler does, `flag-webhooks/*` from
 * src/; `banner` is code run before the rest.
 */
export function bundleWorker(entry: string, banner?: string): Promise<string> {
  return bundleAsWrangler({
    ...(banner === undefined ? {} : { banner: { js: banner } }),
    entryPoints: [resolve(root, entry)],
    plugins: [fromSource],
  });
}

/** The compatibility date of every Worker the tests run (no compatibility flags: no Node built-ins). */
export const COMPATIBILITY_DATE = "2024-09-23";

/** Miniflare's options for a Worker test besides its script: bindings, Durable Objects, queues, KV, D1. */
export type WorkerSetup = Omit<
  SharedOptions & WorkerOptions,
  "modules" | "script" | "scriptPath" | "compatibilityDate"
>;

/**
 * Miniflare running, in workerd, the Worker bundled from `entry` (see {@link bundleWorker}) with
 * `setup`, ready for requests; with `stryker`, under Stryker the mutant switched on in this
 * process is switched on inside workerd too ({@link strykerMutantBanner}).
 */
export async function startWorker(
  entry: string,
  setup: WorkerSetup = {},
  { stryker = false } = {},
): Promise<Miniflare> {
  const mf = new Miniflare({
    ...setup,
    modules: true,
    script: await bundleWorker(entry, stryker ? strykerMutantBanner() : undefined),
    compatibilityDate: COMPATIBILITY_DATE,
  } as MiniflareOptions);
  await mf.ready;
  return mf;
}

// Stryker's state in this process: the mutant it switched on, and the coverage its instrumented
// src/ counts (`static` when no test is running, which is always the case inside workerd).
interface StrykerState {
  activeMutant?: unknown;
  mutantCoverage?: { static: Record<string, number>; perTest: Record<string, Record<string, number>> };
}
const stryker = () => (globalThis as { __stryker__?: StrykerState }).__stryker__;

/**
 * Under Stryker, the code that switches on in workerd the mutant Stryker switched on in this
 * process (its runner sets `globalThis.__stryker__.activeMutant` before a test file's hooks run,
 * and the instrumented src/ reads it from the same global): code bundled from src/ that only runs
 * inside workerd (the Durable Object) then runs the mutant too. Undefined outside Stryker.
 */
export function strykerMutantBanner(): string | undefined {
  const active = stryker()?.activeMutant;
  return active === undefined ? undefined : `globalThis.__stryker__ = { activeMutant: ${JSON.stringify(active)} };`;
}

/**
 * Under Stryker, adds the coverage the instrumented src/ counted inside workerd (`counted`, what
 * the Worker answers from its own `globalThis.__stryker__.mutantCoverage.static`) to this
 * process's, before Stryker's own afterAll reads it: without it Stryker sees no test reach the
 * Durable Object's code and runs none of its mutants. Static coverage, as workerd knows no test:
 * with `ignoreStatic` off each such mutant runs the whole test file. Nothing outside Stryker.
 */
export async function reportWorkerdCoverage(counted: () => Promise<unknown>): Promise<void> {
  const coverage = stryker()?.mutantCoverage;
  if (!coverage) return;
  const inWorkerd = (await counted()) as Record<string, number> | null;
  for (const [id, hits] of Object.entries(inWorkerd ?? {})) {
    coverage.static[id] = (coverage.static[id] ?? 0) + hits;
  }
}
