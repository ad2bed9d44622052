import { join, resolve } from "node:path";
import { type BuildOptions, build, type Plugin } from "esbuild";
import { entries, specifier } from "../../entries.js";

// Test fixtures bundled from src/, so that a child process (killed and restarted by the crash
// tests) starts at once, without a TypeScript loader. One plugin for every bundle the tests make.

const root = resolve(import.meta.dirname, "../..");

/** `flag-webhooks/*` resolved to its source (entries.ts), as vitest.config.ts maps it for the other examples. */
export const fromSource: Plugin = {
  name: "flag-webhooks-from-source",
  setup(b) {
    const sources = new Map(entries.map((entry) => [specifier(entry), entry.source]));
    b.onResolve({ filter: /^flag-webhooks(\/|$)/ }, (args) => {
      const file = sources.get(args.path);
      return file ? { path: resolve(root, file) } : { errors: [{ text: `${args.path} is no entry of entries.ts` }] };
    });
  },
};

/**
 * A script a test writes inline (`contents`, TypeScript or JavaScript), bundled for Node into
 * `.test-results/<name>.mjs` as {@link nodeFixture} bundles a fixture file; resolves with the file.
 */
export async function nodeScript(name: string, contents: string, external: string[]): Promise<string> {
  return bundleForNode(
    { stdin: { contents, resolveDir: root, loader: "ts", sourcefile: `${name}.ts` } },
    name,
    external,
  );
}

/**
 * `test/fixtures/<fixture>.ts` bundled for Node into `.test-results/<fixture>.mjs`, the packages
 * in `external` (the database drivers) left to the process to load; resolves with the file.
 */
export async function nodeFixture(fixture: string, external: string[]): Promise<string> {
  return bundleForNode({ entryPoints: [join(root, `test/fixtures/${fixture}.ts`)] }, fixture, external);
}

async function bundleForNode(
  input: Pick<BuildOptions, "stdin" | "entryPoints">,
  name: string,
  external: string[],
): Promise<string> {
  const outfile = join(root, `.test-results/${name}.mjs`);
  await build({
    ...input,
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    external,
    plugins: [fromSource],
    logLevel: "warning",
  });
  return outfile;
}
