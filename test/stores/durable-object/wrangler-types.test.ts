import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A Worker whose Env comes from `wrangler types` (test/fixtures/wrangler-types, see its README):
// the DEDUPE binding is DurableObjectNamespace<DedupeObject>, which holds only for a class the
// runtime's types accept as a Durable Object. Checked as a user's project checks it: strict, with
// the declarations checked too (no skipLibCheck), against the built package's types.

const root = resolve(import.meta.dirname, "../../..");
let project: string;

beforeAll(() => {
  if (!existsSync(join(root, "dist/cloudflare.d.ts"))) throw new Error("dist is not built: run npm run build first");
  project = mkdtempSync(join(tmpdir(), "flag-webhooks-wrangler-types-"));
  cpSync(join(root, "test/fixtures/wrangler-types"), project, { recursive: true });
  mkdirSync(join(project, "node_modules/@cloudflare"), { recursive: true });
  symlinkSync(root, join(project, "node_modules/flag-webhooks"), "dir");
  symlinkSync(
    join(root, "node_modules/@cloudflare/workers-types"),
    join(project, "node_modules/@cloudflare/workers-types"),
    "dir",
  );
});
afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

/** tsc's output for the Worker under a tsconfig's compiler options: "" when it type-checks. */
function typecheck(compilerOptions: Record<string, unknown>): string {
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: "es2022",
        module: "es2022",
        moduleResolution: "bundler",
        lib: ["es2022"],
        skipLibCheck: false,
        ...compilerOptions,
      },
      include: ["src", "worker-configuration.d.ts"],
    }),
  );
  try {
    execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", project], {
      encoding: "utf8",
      stdio: "pipe",
    });
    return "";
  } catch (error) {
    return String((error as { stdout?: string }).stdout) || String(error);
  }
}

describe("flag-webhooks/cloudflare under `wrangler types`", () => {
  it("type-checks a Worker whose DEDUPE binding is DurableObjectNamespace<DedupeObject>, without skipLibCheck", () => {
    expect(typecheck({ types: ["@cloudflare/workers-types"] })).toBe("");
  }, 120_000);
});
