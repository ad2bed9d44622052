// The case table under Bun: `bun --no-install test/runtimes/bun.ts <input.json>`. Loads the built
// core and fetch adapter from the module URLs in the input, and prints the results as one JSON line.
import { type Library, runSuite, type SuiteInput } from "./runner.js";

// Bun's types are not installed; this is the one slice of them used here.
declare const Bun: { argv: string[]; file(path: string): { text(): Promise<string> } };

const inputPath = Bun.argv[2];
if (!inputPath) throw new Error("usage: bun test/runtimes/bun.ts <input.json>");
const input = JSON.parse(await Bun.file(inputPath).text()) as SuiteInput;
if (!input.modules) throw new Error("the input names no modules to load");
// runner.js is evaluated before these imports, so its HMAC probe sees the library load.
const lib: Library = { core: await import(input.modules.core), adapter: await import(input.modules.adapter) };
if (input.modules.honoAdapter && input.modules.hono) {
  lib.hono = { adapter: await import(input.modules.honoAdapter), Hono: (await import(input.modules.hono)).Hono };
}
console.log(JSON.stringify(await runSuite(input, lib)));
