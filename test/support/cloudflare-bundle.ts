import { resolve } from "node:path";
import { build, type Plugin } from "esbuild";

// Bundles the Cloudflare test fixtures (test/fixtures/cloudflare/) from src/ as wrangler would,
// for the tests that run them in workerd through miniflare.

const root = resolve(import.meta.dirname, "../..");

/** `flag-webhooks/*` resolved to src/, as vitest.config.ts maps it for the other examples. */
const fromSource: Plugin = {
  name: "flag-webhooks-from-source",
  setup(b) {
    const entries: Record<string, string> = {
      "flag-webhooks": "src/index.ts",
      "flag-webhooks/fetch": "src/adapters/fetch.ts",
      "flag-webhooks/cloudflare": "src/cloudflare/index.ts",
    };
    b.onResolve({ filter: /^flag-webhooks(\/|$)/ }, (args) => {
      const file = entries[args.path];
      return file ? { path: resolve(root, file) } : { errors: [{ text: `no source mapping for ${args.path}` }] };
    });
  },
};

/**
 * Bundles a Worker (a path from the repository's root) as wrangler does: ESM, the
 * workerd/worker/browser conditions; `banner` is code run before the rest.
 */
export async function bundleWorker(entry: string, banner?: string): Promise<string> {
  const result = await build({
    ...(banner === undefined ? {} : { banner: { js: banner } }),
    entryPoints: [resolve(root, entry)],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["browser", "module", "main"],
    plugins: [fromSource],
    logLevel: "silent",
  });
  const code = result.outputFiles[0]?.text;
  if (!code) throw new Error("esbuild produced no bundle");
  return code;
}

/**
 * Under Stryker, the code that switches on in workerd the mutant Stryker switched on in this
 * process (its runner sets `globalThis.__stryker__.activeMutant` before a test file's hooks run,
 * and the instrumented src/ reads it from the same global): code bundled from src/ that only runs
 * inside workerd (the Durable Object) then runs the mutant too. Undefined outside Stryker.
 */
export function strykerMutantBanner(): string | undefined {
  const active = (globalThis as { __stryker__?: { activeMutant?: unknown } }).__stryker__?.activeMutant;
  return active === undefined ? undefined : `globalThis.__stryker__ = { activeMutant: ${JSON.stringify(active)} };`;
}
