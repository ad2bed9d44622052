import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");
const readme = readFileSync(resolve(root, "README.md"), "utf8");
const entries = [
  "src/index.ts",
  "src/adapters/express.ts",
  "src/adapters/koa.ts",
  "src/adapters/fetch.ts",
  "src/testing/index.ts",
  "src/emulator/index.ts",
  "src/adapters/fastify.ts",
  "src/adapters/hono.ts",
  "src/adapters/lambda.ts",
  "src/queue/bullmq.ts",
  "src/dynamodb/index.ts",
  "src/cloudflare/index.ts",
  "src/postgres/inbox.ts",
  "src/otel/index.ts",
];

/** Names an entry exports, values and types, read from its source. */
function exportedNames(file: string): string[] {
  const source = readFileSync(resolve(root, file), "utf8");
  const names = new Set<string>();
  for (const [, list] of source.matchAll(/export (?:type )?\{([^}]*)\}/g)) {
    for (const part of (list ?? "").split(",")) {
      const name = part
        .replace(/\btype\b/, "")
        .trim()
        .split(/\s+as\s+/)
        .pop();
      if (name) names.add(name);
    }
  }
  for (const [, name] of source.matchAll(/^export (?:async )?(?:function|const|class|type|interface) (\w+)/gm)) {
    if (name) names.add(name);
  }
  return [...names];
}

describe("README", () => {
  it.each(entries)("documents every name %s exports", (file) => {
    const names = exportedNames(file);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !new RegExp(`\\b${name}\\b`).test(readme))).toEqual([]);
  });

  it("gives the two set-up commands for a fresh machine", () => {
    expect(readme).toContain("npm install --no-audit --no-fund && npm run demo");
    expect(readme).toContain("npm install --no-audit --no-fund && npm test");
  });

  it("documents every error code with its status", () => {
    const errors = readFileSync(resolve(root, "src/errors.ts"), "utf8");
    for (const [, code, status] of errors.matchAll(/^\s+(\w+): (\d{3}),$/gm)) {
      expect(readme).toMatch(new RegExp(`\\| \`${code}\`\\s*\\| ${status}\\s*\\|`));
    }
  });
});

describe("README code", () => {
  it("type-checks every TypeScript snippet as written", () => {
    const snippets = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code]) => code ?? "");
    expect(snippets.length).toBeGreaterThanOrEqual(7);
    const dir = resolve(root, ".test-results/readme-snippets");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files = snippets.map((code, i) => {
      const file = resolve(dir, `snippet-${i + 1}.ts`);
      writeFileSync(file, code);
      return file;
    });
    // The repository's test tsconfig maps "flag-webhooks" to src/, as for the examples.
    writeFileSync(
      resolve(dir, "tsconfig.json"),
      JSON.stringify({
        extends: "../../tsconfig.test.json",
        include: files,
        compilerOptions: { noUnusedLocals: false },
      }),
    );
    let output = "";
    try {
      execFileSync(process.execPath, [resolve(root, "node_modules/typescript/bin/tsc"), "-p", dir], {
        encoding: "utf8",
      });
    } catch (error) {
      output = String((error as { stdout?: string }).stdout);
    }
    expect(output).toBe("");
  });
});
