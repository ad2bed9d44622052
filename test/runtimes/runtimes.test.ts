import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { BuildOptions, Plugin } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCases, type DeliveryCase, LIMIT, SECRET, SECRETS } from "../support/cases.js";
import { bundleAsWrangler, COMPATIBILITY_DATE } from "../support/cloudflare-bundle.js";
import { freePort } from "../support/free-port.js";
import { startProcess, untilAnswering } from "../support/processes.js";
import { vector, vectors } from "../support/vectors.js";
import type { Answer, SuiteInput, SuiteResult, WireVector } from "./runner.js";

// The fetch adapter and the core, built, in the runtimes users deploy them to: Bun, Deno, and
// Cloudflare's workerd with no compatibility flags. The same case table as test/adapters/
// conformance.test.ts runs inside each runtime (runner.ts), through the fetch handler and through
// the Hono middleware in a Hono app, then the three runtime examples are served there unmodified.
// Needs a built dist: FLAG_WEBHOOKS_DIST, else ./dist (`npm test` builds it), which is copied
// first and loaded from the copy.

const root = resolve(import.meta.dirname, "../..");
const builtDist = resolve(process.env.FLAG_WEBHOOKS_DIST ?? join(root, "dist"));
const here = join(root, "test/runtimes");
// Hono's own ES module build, loaded by Bun and Deno from its file as the Worker bundle inlines it.
const honoDir = join(root, "node_modules/hono");
const bin = (name: string) => join(root, "node_modules/.bin", name);
const TIMEOUT = 30_000;

/** `[name, item]` rows, so `%s` puts the whole name in the title (`$name` is cut at 40 characters). */
const named = <T extends { name: string }>(items: T[]): [string, T][] => items.map((item) => [item.name, item]);

const cases = await buildCases();
const compact = vector("flag-updated-compact");
const signedBody = new Uint8Array(compact.body);
const tamperedBody = new TextEncoder().encode(compact.body.toString().replace("true", "fals"));

// Bodies go to the runtime as hex; a body that is valid UTF-8 (and survives the round trip) is
// also signed as a string there.
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const wireVectors: WireVector[] = vectors.map((v) => {
  const wire: WireVector = { name: v.name, secret: v.secret, signature: v.signature, bodyHex: v.body.toString("hex") };
  try {
    const text = utf8.decode(v.body);
    if (Buffer.from(text, "utf8").equals(v.body)) wire.text = text;
  } catch {
    // not UTF-8: signed as bytes only
  }
  return wire;
});

/** Scratch space for one run: the input file, a DENO_DIR, and flag-webhooks "installed" from dist. */
interface Scratch {
  work: string;
  /** A project whose node_modules/flag-webhooks is package.json plus a copy of dist. */
  project: string;
  /** That copy of dist, which every runtime loads. */
  dist: string;
  input: SuiteInput;
  inputPath: string;
}

/**
 * Runs `start` in a beforeAll, and returns a getter for its value. If `start` threw, every test
 * that asks for the value fails with that error, instead of being skipped after a failed hook.
 */
function prepare<T>(start: () => Promise<T>): () => T {
  let outcome: { value: T } | { error: unknown } | undefined;
  beforeAll(async () => {
    try {
      outcome = { value: await start() };
    } catch (error) {
      outcome = { error };
    }
  }, TIMEOUT + 10_000);
  return () => {
    if (outcome === undefined) throw new Error("the beforeAll hook did not finish");
    if ("error" in outcome) throw outcome.error;
    return outcome.value;
  };
}

let scratchDir: string | undefined;
const scratch = prepare(async (): Promise<Scratch> => {
  const work = mkdtempSync(join(tmpdir(), "flag-webhooks-runtimes-"));
  scratchDir = work;
  const project = join(work, "project");
  const installed = join(project, "node_modules/flag-webhooks");
  mkdirSync(installed, { recursive: true });
  writeFileSync(join(installed, "package.json"), readFileSync(join(root, "package.json")));
  const dist = await snapshot(builtDist, join(installed, "dist"));

  const input: SuiteInput = {
    secrets: SECRETS,
    limit: LIMIT,
    cases: cases.map((c) => ({
      name: c.name,
      method: c.method ?? "POST",
      headers: c.headers,
      bodyHex: c.body.toString("hex"),
      streamed: c.streamed ?? false,
    })),
    vectors: wireVectors,
    modules: {
      core: pathToFileURL(join(dist, "index.js")).href,
      adapter: pathToFileURL(join(dist, "fetch.js")).href,
      honoAdapter: pathToFileURL(join(dist, "hono.js")).href,
      hono: pathToFileURL(join(honoDir, "dist/index.js")).href,
    },
  };
  const inputPath = join(work, "input.json");
  writeFileSync(inputPath, JSON.stringify(input));
  return { work, project, dist, input, inputPath };
});

afterAll(() => {
  if (scratchDir) rmSync(scratchDir, { recursive: true, force: true });
});

/**
 * Copies a built dist, so that a rebuild while these tests run cannot pull files from under the
 * runtimes (in `npm test`, test/package/consumers.test.ts runs `npm pack`, whose prepack cleans and rebuilds
 * ./dist). A copy that is missing an entry or a chunk an entry imports is taken again, for a while.
 */
async function snapshot(from: string, to: string): Promise<string> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    rmSync(to, { recursive: true, force: true });
    // A rebuild empties the folder but keeps it, so no folder at all is worth no wait.
    const exists = existsSync(from);
    if (exists) cpSync(from, to, { recursive: true });
    const missing = exists ? missingFiles(to) : [from];
    if (missing.length === 0) return to;
    if (!exists || Date.now() > deadline) {
      throw new Error(
        `no complete build of flag-webhooks in ${from} (missing ${missing.join(", ")}): run \`npm run build\`, ` +
          "or set FLAG_WEBHOOKS_DIST to a built copy (e.g. `npx tsup --out-dir /tmp/fw-dist`)",
      );
    }
    await new Promise((ok) => setTimeout(ok, 250));
  }
}

/** The ESM entries the runtimes load, and every file they import, that `dist` lacks. */
function missingFiles(dist: string): string[] {
  const entries = ["index.js", "fetch.js", "hono.js"];
  const missing = entries.filter((file) => !existsSync(join(dist, file)));
  if (missing.length > 0) return missing;
  for (const file of readdirSync(dist).filter((name) => name.endsWith(".js"))) {
    for (const [, imported] of readFileSync(join(dist, file), "utf8").matchAll(/\bfrom\s*["']\.\/([^"']+)["']/g)) {
      if (imported && !existsSync(join(dist, imported))) missing.push(`${imported} (imported by ${file})`);
    }
  }
  return missing;
}

/** The package's own import entry points, `flag-webhooks/fetch` → `<dist>/fetch.js`, from its exports. */
function entryPoints(dist: string): Record<string, string> {
  const { exports } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    exports: Record<string, string | { import?: { default?: string } }>;
  };
  const entries: Record<string, string> = {};
  for (const [key, target] of Object.entries(exports)) {
    const file = typeof target === "string" ? undefined : target.import?.default;
    if (!file?.startsWith("./dist/")) continue;
    entries[`flag-webhooks${key.slice(1)}`] = join(dist, file.slice("./dist/".length));
  }
  return entries;
}

const denoEnv = (work: string) => ({
  ...process.env,
  DENO_DIR: join(work, "deno"),
  DENO_NO_UPDATE_CHECK: "1",
  NO_COLOR: "1",
});
const denoFlags = ["--no-config", "--no-lock", "--no-remote", "--no-npm"];

/** Runs a runtime to completion and parses the JSON line it prints last. */
function runJson(label: string, file: string, args: string[], env = process.env): Promise<SuiteResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(file, args, { cwd: root, env, timeout: TIMEOUT, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) {
        reject(new Error(`${label} could not run the case table (${error.message.split("\n")[0]}):\n${stderr}`));
        return;
      }
      try {
        resolvePromise(JSON.parse(stdout.trim().split("\n").at(-1) ?? ""));
      } catch {
        reject(new Error(`${label} printed no JSON result:\n${stdout}\n${stderr}`));
      }
    });
  });
}

/**
 * esbuild as wrangler bundles a Worker: ESM, the workerd/worker/browser conditions, and
 * flag-webhooks resolved through its package.json exports as if installed in node_modules.
 */
async function bundleForWorkers(project: string, entry: Pick<BuildOptions, "entryPoints" | "stdin">): Promise<string> {
  const asInstalled: Plugin = {
    name: "flag-webhooks-as-installed",
    setup(b) {
      b.onResolve({ filter: /^flag-webhooks(\/|$)/ }, (args) =>
        args.pluginData === "installed"
          ? undefined
          : b.resolve(args.path, { kind: args.kind, resolveDir: project, pluginData: "installed" }),
      );
    },
  };
  return bundleAsWrangler({ ...entry, plugins: [asInstalled] });
}

/** Workers as deployed with no compatibility flags: no nodejs_compat, so no Node built-ins at all. */
function workerd(script: string, bindings: Record<string, string> = {}): Miniflare {
  return new Miniflare({ modules: true, script, compatibilityDate: COMPATIBILITY_DATE, bindings });
}

// The runner module comes first so that its HMAC probe is installed before the library loads.
const CASE_WORKER = `
import { runSuite } from "./runner.ts";
import * as core from "flag-webhooks";
import * as adapter from "flag-webhooks/fetch";
import * as honoAdapter from "flag-webhooks/hono";
import { Hono } from "hono";
export default {
  async fetch(request) {
    return Response.json(await runSuite(await request.json(), { core, adapter, hono: { adapter: honoAdapter, Hono } }));
  },
};
`;

interface Runtime {
  name: string;
  userAgent: RegExp;
  hmac: "node:crypto" | "Web Crypto";
  run(scratch: Scratch): Promise<SuiteResult>;
}

const runtimes: Runtime[] = [
  {
    name: "Bun",
    userAgent: /^Bun\//,
    hmac: "node:crypto",
    run: ({ inputPath }) => runJson("Bun", bin("bun"), ["--no-install", join(here, "bun.ts"), inputPath]),
  },
  {
    name: "Deno",
    userAgent: /^Deno\//,
    hmac: "node:crypto",
    run: ({ work, dist, inputPath }) =>
      runJson(
        "Deno",
        bin("deno"),
        ["run", ...denoFlags, `--allow-read=${dist},${here},${inputPath},${honoDir}`, join(here, "deno.ts"), inputPath],
        denoEnv(work),
      ),
  },
  {
    name: "workerd (Cloudflare Workers, no compatibility flags)",
    userAgent: /^Cloudflare-Workers$/,
    hmac: "Web Crypto",
    async run({ project, input }) {
      const { modules: _, ...rest } = input;
      const stdin = { contents: CASE_WORKER, resolveDir: here, loader: "js" } as const;
      const mf = workerd(await bundleForWorkers(project, { stdin }));
      try {
        const response = await mf.dispatchFetch("http://localhost/", { method: "POST", body: JSON.stringify(rest) });
        const text = await response.text();
        if (response.status !== 200) throw new Error(`workerd answered ${response.status}:\n${text}`);
        return JSON.parse(text) as SuiteResult;
      } finally {
        await mf.dispose();
      }
    },
  },
];

function expectAnswer(c: DeliveryCase, answer: Answer | undefined): void {
  if (!answer) throw new Error(`the runtime returned no answer for "${c.name}"`);
  expect(answer.thrown, "the fetch handler threw").toBeUndefined();
  expect(answer.status).toBe(c.status);
  const json = answer.body ? JSON.parse(answer.body) : undefined;
  if (c.code) {
    expect(json).toEqual({ error: { code: c.code, message: expect.any(String) } });
    expect(answer.contentType).toMatch(/^application\/json/);
    expect(answer.body).not.toContain(SECRET);
    expect(answer.body).not.toContain(SECRETS[0]);
  } else {
    expect(json.received.type).toBe(c.eventType);
    expect(json.received.id).toBe("evt_01HZX3K9");
  }
  if (c.code === "method_not_allowed") expect(answer.allow).toBe("POST");
}

describe.each(named(runtimes))("the fetch handler and the core under %s", (_, runtime) => {
  const run = prepare(async () => runtime.run(scratch()));

  it(`really runs inside ${runtime.name}`, () => {
    expect(run().userAgent).toMatch(runtime.userAgent);
  });

  if (runtime.hmac === "node:crypto") {
    it("signs with node:crypto, found through process.getBuiltinModule, and never calls Web Crypto", () => {
      expect(run().hmac.builtinsRequested).toContain("node:crypto");
      expect(run().hmac.subtleWrapped).toBe(true);
      expect(run().hmac.webCrypto).toEqual({ importKey: 0, sign: 0, verify: 0 });
    });
  } else {
    it("signs with Web Crypto, with no process, no Buffer and no Node built-in", () => {
      expect(run().hmac.globals).toEqual({ process: "undefined", getBuiltinModule: "undefined", Buffer: "undefined" });
      expect(run().hmac.builtinsRequested).toEqual([]);
      expect(run().hmac.subtleWrapped).toBe(true);
      expect(run().hmac.webCrypto.sign).toBeGreaterThan(0);
      expect(run().hmac.webCrypto.verify).toBeGreaterThan(0);
    });
  }

  it.each(named(cases))("%s", (_, c) => {
    expectAnswer(
      c,
      run().cases.find((a) => a.name === c.name),
    );
  });

  it("keeps serving valid deliveries after every hostile request in the table", () => {
    expectAnswer(cases[0] as DeliveryCase, run().afterHostile);
  });

  it.each(named(cases))("Hono middleware in a Hono app: %s", (_, c) => {
    expectAnswer(
      c,
      run().hono?.cases.find((a) => a.name === c.name),
    );
  });

  it("Hono middleware in a Hono app: keeps serving valid deliveries after every hostile request", () => {
    expectAnswer(cases[0] as DeliveryCase, run().hono?.afterHostile);
  });

  it.each(named(wireVectors))("signs and verifies the openssl vector %s", (_, v) => {
    const got = run().vectors.find((r) => r.name === v.name);
    if (!got) throw new Error(`the runtime returned no result for vector "${v.name}"`);
    expect(got.thrown).toBeUndefined();
    expect(got.signed).toBe(v.signature);
    if (v.text !== undefined) expect(got.signedText).toBe(v.signature);
    expect(got.verified).toBe(true);
    expect(got.verifiedAltered).toBe(false);
  });
});

// ---- The examples, unmodified, in their runtimes ----

interface Reply {
  status: number;
  contentType: string | null;
  json: any;
}

interface Served {
  send(body: Uint8Array<ArrayBuffer>, signature: string): Promise<Reply>;
  stop(): Promise<void>;
}

interface Example {
  name: string;
  start(scratch: Scratch): Promise<Served>;
}

async function readReply(response: {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}): Promise<Reply> {
  const text = await response.text();
  return {
    status: response.status,
    contentType: response.headers.get("content-type"),
    json: text ? JSON.parse(text) : undefined,
  };
}

/** Starts an example server as a child process and waits until it answers on its port. */
async function serve(
  label: string,
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  port: number,
): Promise<Served> {
  const child = startProcess(file, args, { cwd: root, env });
  const url = `http://127.0.0.1:${port}/`;
  await untilAnswering(label, child, url);
  return {
    async send(body, signature) {
      return readReply(
        await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", "service-signature": signature },
          body,
        }),
      );
    },
    stop: () => child.stop(),
  };
}

const examples: Example[] = [
  {
    name: "examples/bun.ts under Bun.serve",
    async start({ work, dist }) {
      const port = await freePort();
      // tsconfig paths send `flag-webhooks/fetch` to the dist under test (Bun would otherwise find
      // ./dist through the package's self-reference, whatever FLAG_WEBHOOKS_DIST says).
      const paths = Object.fromEntries(Object.entries(entryPoints(dist)).map(([name, file]) => [name, [file]]));
      const tsconfig = join(work, "tsconfig.bun.json");
      writeFileSync(tsconfig, JSON.stringify({ compilerOptions: { paths } }));
      return serve(
        "Bun",
        bin("bun"),
        ["--no-install", `--tsconfig-override=${tsconfig}`, "examples/bun.ts"],
        { ...process.env, WEBHOOK_SECRET: compact.secret, PORT: String(port) },
        port,
      );
    },
  },
  {
    name: "examples/deno.ts under Deno.serve",
    async start({ work, dist }) {
      const port = await freePort();
      const imports = Object.fromEntries(
        Object.entries(entryPoints(dist)).map(([name, file]) => [name, pathToFileURL(file).href]),
      );
      const importMap = join(work, "import_map.json");
      writeFileSync(importMap, JSON.stringify({ imports }));
      return serve(
        "Deno",
        bin("deno"),
        [
          "run",
          ...denoFlags,
          `--import-map=${importMap}`,
          "--allow-env=WEBHOOK_SECRET,PORT",
          `--allow-net=127.0.0.1:${port}`,
          "examples/deno.ts",
        ],
        { ...denoEnv(work), WEBHOOK_SECRET: compact.secret, PORT: String(port) },
        port,
      );
    },
  },
  {
    name: "examples/cloudflare-worker.ts under workerd, bundled as wrangler would, with no compatibility flags",
    async start({ project }) {
      const code = await bundleForWorkers(project, { entryPoints: [join(root, "examples/cloudflare-worker.ts")] });
      const builtin = /\bfrom\s*["'](node:[^"']+)|\bimport\(\s*["'](node:[^"']+)/.exec(code);
      if (builtin) throw new Error(`the Worker bundle imports ${builtin[1] ?? builtin[2]}, which needs nodejs_compat`);
      const mf = workerd(code, { WEBHOOK_SECRET: compact.secret });
      return {
        async send(body, signature) {
          return readReply(
            await mf.dispatchFetch("https://webhooks.example.com/", {
              method: "POST",
              headers: { "content-type": "application/json", "service-signature": signature },
              body,
            }),
          );
        },
        stop: () => mf.dispose(),
      };
    },
  },
];

describe.each(named(examples))("%s", (_, example) => {
  let started: Served | undefined;
  const served = prepare(async () => {
    started = await example.start(scratch());
    return started;
  });
  afterAll(async () => {
    await started?.stop();
  });

  it("answers a signed delivery with 200 and the event's id and type", async () => {
    const reply = await served().send(signedBody, compact.signature);
    expect(reply.status).toBe(200);
    expect(reply.contentType).toMatch(/^application\/json/);
    expect(reply.json).toEqual({ received: "evt_01HZX3K9", type: "flag.updated" });
  });

  it("refuses a tampered delivery with 401 invalid_signature", async () => {
    const reply = await served().send(tamperedBody, compact.signature);
    expect(reply.status).toBe(401);
    expect(reply.contentType).toMatch(/^application\/json/);
    expect(reply.json).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
  });
});
