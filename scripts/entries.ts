// Writes the fields of package.json and tsconfig.test.json that are made from entries.ts (the one
// list of the package's entries), which neither file can read for itself:
//   npm run entries          (tsx scripts/entries.ts --write)  rewrites them
//   tsx scripts/entries.ts   says which disagree, and exits 1 if any does
// test/package/entries.test.ts runs the same comparison.
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { command, distName, type Entry, entries, specifier } from "../entries.js";

const root = resolve(import.meta.dirname, "..");

/** One entry's `exports` value: ESM and CommonJS, each with its own declarations. */
function conditions(entry: Entry) {
  const file = `./dist/${distName(entry)}`;
  return {
    import: { types: `${file}.d.ts`, default: `${file}.js` },
    require: { types: `${file}.d.cts`, default: `${file}.cjs` },
  };
}

/** The package.json fields made from the list, in the order package.json holds them. */
export function packageFields(): Record<string, unknown> {
  const core = entries.find((entry) => entry.name === ".");
  if (!core) throw new Error('entries.ts has no "." entry: flag-webhooks itself');
  const subpaths = entries.filter((entry) => entry !== core);
  const peers = Object.fromEntries(
    entries.flatMap((entry) => Object.entries(entry.peers ?? {})).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  return {
    main: `./dist/${distName(core)}.cjs`,
    module: `./dist/${distName(core)}.js`,
    // The CommonJS declarations: what a `moduleResolution: node` project (which ignores
    // `exports`) gets for the package itself, and typesVersions for each subpath.
    types: `./dist/${distName(core)}.d.cts`,
    bin: { [command.name]: `./dist/${command.file}.js` },
    typesVersions: {
      "*": Object.fromEntries(subpaths.map((entry) => [entry.name, [`./dist/${distName(entry)}.d.cts`]])),
    },
    exports: {
      ...Object.fromEntries(entries.map((entry) => [entry.name === "." ? "." : `./${entry.name}`, conditions(entry)])),
      "./package.json": "./package.json",
    },
    peerDependencies: peers,
    peerDependenciesMeta: Object.fromEntries(Object.keys(peers).map((name) => [name, { optional: true }])),
  };
}

/** tsconfig.test.json's `paths`: each public name to its source, as vitest.config.ts aliases it. */
export function testPaths(): Record<string, string[]> {
  return Object.fromEntries(entries.map((entry) => [specifier(entry), [`./${entry.source}`]]));
}

/** package.json with the list's fields put in (each in its place; a missing one at the end). */
function writtenPackage(text: string): string {
  const pkg = JSON.parse(text) as Record<string, unknown>;
  Object.assign(pkg, packageFields());
  return `${JSON.stringify(pkg, null, 2)}\n`;
}

/** tsconfig.test.json (JSON with comments, kept) with its `paths` block made from the list. */
function writtenTsconfig(text: string): string {
  const block = /^( *)"paths": \{[^}]*\}/m;
  const indent = block.exec(text)?.[1];
  if (indent === undefined) throw new Error('tsconfig.test.json has no "paths" block to write');
  const lines = Object.entries(testPaths()).map(
    ([name, [path]]) => `${indent}  ${JSON.stringify(name)}: [${JSON.stringify(path)}]`,
  );
  return text.replace(block, `${indent}"paths": {\n${lines.join(",\n")}\n${indent}}`);
}

/** Each file made from the list: its path and what it should hold given what it holds. */
export const generated = [
  { file: "package.json", write: writtenPackage },
  { file: "tsconfig.test.json", write: writtenTsconfig },
] as const;

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const write = process.argv.includes("--write");
  let stale = 0;
  for (const { file, write: made } of generated) {
    const path = resolve(root, file);
    const text = readFileSync(path, "utf8");
    const wanted = made(text);
    if (wanted === text) continue;
    if (write) {
      writeFileSync(path, wanted);
      console.log(`wrote ${file}`);
    } else {
      stale++;
      console.log(`${file} disagrees with entries.ts: run npm run entries`);
    }
  }
  process.exitCode = stale === 0 ? 0 : 1;
}
