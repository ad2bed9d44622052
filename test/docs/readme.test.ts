import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { entries as packageEntries } from "../../entries.js";
import { anchors, brokenLinks, githubSlug, relativeLinks } from "../support/markdown.js";

const root = resolve(import.meta.dirname, "../..");
const readme = readFileSync(resolve(root, "README.md"), "utf8");
/** The README, the front door, and every page of docs/, each as [path from the root, text]. */
const pages: [string, string][] = [
  "README.md",
  ...readdirSync(resolve(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
].map((path) => [path, readFileSync(resolve(root, path), "utf8")]);
const allDocs = pages.map(([, text]) => text).join("\n");
/** Every entry's source file (entries.ts). */
const entries = packageEntries.map((entry) => entry.source);

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

describe("README and docs/", () => {
  it.each(entries)("documents every name %s exports", (file) => {
    const names = exportedNames(file);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !new RegExp(`\\b${name}\\b`).test(allDocs))).toEqual([]);
  });

  it("gives the two set-up commands for a fresh machine", () => {
    expect(readme).toContain("npm install --no-audit --no-fund && npm run demo");
    expect(readme).toContain("npm install --no-audit --no-fund && npm test");
  });

  it("documents every error code with its status in docs/errors.md", () => {
    const errors = readFileSync(resolve(root, "src/errors.ts"), "utf8");
    const page = readFileSync(resolve(root, "docs/errors.md"), "utf8");
    const codes = [...errors.matchAll(/^\s+(\w+): (\d{3}),$/gm)];
    expect(codes.length).toBeGreaterThan(5);
    for (const [, code, status] of codes) {
      expect(page).toMatch(new RegExp(`\\| \`${code}\`\\s*\\| ${status}\\s*\\|`));
    }
  });
});

describe("README and docs/ code", () => {
  it("type-checks every TypeScript snippet of every page as written", () => {
    const snippets = pages.flatMap(([path, text]) =>
      [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code], i) => ({
        name: `${path.replace(/\W+/g, "-")}-${i + 1}.ts`,
        code: code ?? "",
      })),
    );
    // 37 snippets when the README held every page, and the quick start's copy.
    expect(snippets.length).toBeGreaterThanOrEqual(38);
    const dir = resolve(root, ".test-results/readme-snippets");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files = snippets.map(({ name, code }) => {
      const file = resolve(dir, name);
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
    // One tsc over every snippet of every page: about 45 s on a 2-core machine, more under load.
  }, 180_000);
});

describe("links of README and docs/", () => {
  it("makes anchors as GitHub does", () => {
    expect(githubSlug("Express (also Connect and plain `node:http`)")).toBe("express-also-connect-and-plain-nodehttp");
    expect(githubSlug("`flag-webhooks/dynamodb`: `DynamoDBDedupeStore` for AWS Lambda")).toBe(
      "flag-webhooksdynamodb-dynamodbdedupestore-for-aws-lambda",
    );
    expect(githubSlug("Scaling out: queue hand-off")).toBe("scaling-out-queue-hand-off");
    expect([...anchors("# A\n\n## A\n\n```sh\n# A\n```\n")]).toEqual(["a", "a-1"]);
  });

  it.each([...pages.map(([path]) => path), "CHANGELOG.md"])(
    "%s: every relative link, image and #anchor resolves",
    (path) => {
      expect(relativeLinks(readFileSync(resolve(root, path), "utf8")).length).toBeGreaterThan(0);
      expect(brokenLinks(root, path)).toEqual([]);
    },
  );

  it("reaches every page of docs/ from the README in one click, and every page links back", () => {
    const fromReadme = new Set(relativeLinks(readme).map((link) => link.split("#")[0]));
    for (const [path, text] of pages.slice(1)) {
      expect(fromReadme.has(path), `README links ${path}`).toBe(true);
      expect(relativeLinks(text), `${path} links back`).toContain("../README.md");
      expect(text.startsWith("# "), `${path} has a title`).toBe(true);
    }
    expect(pages.length).toBeGreaterThan(20);
  });
});
