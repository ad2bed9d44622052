import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { resolve } from "node:path";
import ts from "typescript";
import { beforeAll, describe, expect, it } from "vitest";
import { distName, entries, specifier } from "../../entries.js";

// The names each entry exports, read from the built package, against a committed snapshot
// (exports.snapshot.txt: each entry, then its values, then its types, one name a line, so that a
// review shows each name added or removed): an export added, renamed or removed by accident fails
// here. When the
// change is meant, record it with `npx vitest run test/package/exports.test.ts -u` and let the
// snapshot's diff show it in review.
//   values: the names an application gets at run time, through import and through require (the
//           package loaded by its own name, through its exports map, as a user loads it);
//   types:  the names its declarations export as types only (interfaces and type aliases), read
//           from dist/*.d.ts and dist/*.d.cts with the TypeScript compiler.
const root = resolve(import.meta.dirname, "../..");
const dist = resolve(root, "dist");

interface Names {
  values: string[];
  types: string[];
}

const sorted = (names: Iterable<string>) => [...names].sort();

/** Each entry's run-time names through import and require, from a plain Node process. */
function runtimeNames(): Record<string, { import: string[]; require: string[] }> {
  const script = `
    import { createRequire } from "node:module";
    const require = createRequire(${JSON.stringify(resolve(root, "package.json"))});
    const names = {};
    for (const name of ${JSON.stringify(entries.map(specifier))}) {
      names[name] = { import: Object.keys(await import(name)), require: Object.keys(require(name)) };
    }
    console.log(JSON.stringify(names));`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" });
  return JSON.parse(out);
}

/** Each declaration file's exports, split into values (with a run-time side) and types only. */
function declaredNames(files: string[]): Map<string, Names> {
  // Every declaration file in dist/ (the entries' and their shared chunks'), and nothing beyond:
  // reading the frameworks' and Node's declarations would take seconds and change no name.
  const all = readdirSync(dist)
    .filter((file) => /\.d\.c?ts$/.test(file))
    .map((file) => resolve(dist, file));
  const program = ts.createProgram(all, {
    noEmit: true,
    noLib: true,
    noResolve: true,
    types: [],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  });
  const checker = program.getTypeChecker();
  const declared = new Map<string, Names>();
  for (const file of files) {
    const source = program.getSourceFile(file);
    const module = source && checker.getSymbolAtLocation(source);
    if (!module) throw new Error(`${file} declares no module`);
    const names: Names = { values: [], types: [] };
    for (const symbol of checker.getExportsOfModule(module)) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      if (target.flags === ts.SymbolFlags.None) throw new Error(`${file}: cannot tell what ${symbol.name} is`);
      const typeOnly = symbol.declarations?.some((node) => ts.isTypeOnlyImportOrExportDeclaration(node)) ?? false;
      const kind = target.flags & ts.SymbolFlags.Value && !typeOnly ? names.values : names.types;
      kind.push(symbol.name);
    }
    declared.set(file, { values: sorted(names.values), types: sorted(names.types) });
  }
  return declared;
}

let runtime: ReturnType<typeof runtimeNames>;
let declared: Map<string, Names>;
const files = (entry: (typeof entries)[number]) => ({
  esm: resolve(dist, `${distName(entry)}.d.ts`),
  cjs: resolve(dist, `${distName(entry)}.d.cts`),
});

beforeAll(() => {
  if (!existsSync(resolve(dist, "index.js"))) throw new Error("dist is not built: run npx tsup first");
  runtime = runtimeNames();
  declared = declaredNames(entries.flatMap((entry) => Object.values(files(entry))));
}, 60_000);

describe.each(entries.map((entry) => [specifier(entry), entry] as const))("%s", (name, entry) => {
  it("exports the same names through import and require", () => {
    expect(sorted(runtime[name]?.require ?? [])).toEqual(sorted(runtime[name]?.import ?? []));
  });

  it("declares the same names for ES modules and CommonJS, its values being the ones it exports at run time", () => {
    const { esm, cjs } = files(entry);
    expect(declared.get(cjs)).toEqual(declared.get(esm));
    expect(declared.get(esm)?.values).toEqual(sorted(runtime[name]?.import ?? []));
  });
});

it("exports the names recorded in exports.snapshot.txt, no more and no fewer", async () => {
  const lines = entries.flatMap((entry) => {
    const values = sorted(runtime[specifier(entry)]?.import ?? []);
    expect(values.length, `${specifier(entry)} exports no value`).toBeGreaterThan(0);
    const types = declared.get(files(entry).esm)?.types ?? [];
    return [specifier(entry), ...values.map((name) => `  ${name}`), ...types.map((name) => `  type ${name}`)];
  });
  await expect(`${lines.join("\n")}\n`).toMatchFileSnapshot("./exports.snapshot.txt");
});
