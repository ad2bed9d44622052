import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");
const readme = readFileSync(resolve(root, "README.md"), "utf8");
const entries = ["src/index.ts", "src/adapters/express.ts", "src/adapters/koa.ts", "src/adapters/fetch.ts"];

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
