// The case table under Deno: `deno run --allow-read=... test/runtimes/deno.ts <input.json>`. Loads
// the built core and fetch adapter from the module URLs in the input, and prints the results as
// one JSON line.

// Deno's types are not installed; this is the one slice of them used here.
declare const Deno: { args: string[]; readTextFile(path: string): Promise<string> };

// Deno resolves no `.js` specifier to a `.ts` file, so runner.ts is imported by its own name. It
// is evaluated before the library, so its HMAC probe sees the library load.
const { runSuite } = (await import(new URL("./runner.ts", import.meta.url).href)) as typeof import("./runner.js");

const inputPath = Deno.args[0];
if (!inputPath) throw new Error("usage: deno run test/runtimes/deno.ts <input.json>");
const input = JSON.parse(await Deno.readTextFile(inputPath)) as import("./runner.js").SuiteInput;
if (!input.modules) throw new Error("the input names no modules to load");
const lib: import("./runner.js").Library = {
  core: await import(input.modules.core),
  adapter: await import(input.modules.adapter),
};
if (input.modules.honoAdapter && input.modules.hono) {
  lib.hono = { adapter: await import(input.modules.honoAdapter), Hono: (await import(input.modules.hono)).Hono };
}
console.log(JSON.stringify(await runSuite(input, lib)));
