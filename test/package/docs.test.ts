import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { brokenLinks, relativeLinks } from "../support/markdown.js";
import { type PackedProject, packedProject, root } from "../support/packed.js";

// The documentation reaches an npm user: the pages, their images, the changelog and the examples
// ship in the package, and every relative link between them resolves inside the installed package,
// since the package names no repository for a registry or an editor to resolve them against.

// What the documentation adds to the tarball, gzipped as npm packs it: the pages (about 65 KB),
// the emulator's screenshot (72 KB, WebP at half its 2x size), the benchmark's method and results,
// the examples and the changelog (about 35 KB together). dist has its own budgets (entries.ts).
// Measured 201,704 B (with package.json, README and LICENSE) with the pages on where to deploy,
// SQLite and the architecture; then 227,983 B with the pages on keeping events for a worker
// (inbox-worker.md) and on ordered delivery (order.md), the command's inbox and schema sections,
// and the benchmark results of both; then 245,503 B with group commit, the cost of memory dedupe
// taken apart, ordering's 1,000-run property tests and Redis Cluster, and their figures; then
// 260,099 B with DynamoDB's transactions and DynamoDB Local, libSQL's lock waits, purge keeping
// done ids, and the store files' mutation figures.
// The budget is that + 5%, rounded up to 64 B, the rule of entries.ts.
const DOCUMENTATION_BUDGET = 273_152;

let project: PackedProject;
beforeAll(() => {
  project = packedProject();
}, 120_000);
afterAll(() => project?.remove());

/** Every file under `dir`, as paths relative to `base`. */
function filesUnder(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name), base) : [relative(base, join(dir, entry.name))],
  );
}

describe("the documentation in the packed package", () => {
  it("ships every page of docs/ with its images, and the changelog", () => {
    const shipped = filesUnder(project.installed);
    const docs = readdirSync(join(root, "docs")).map((name) => `docs/${name}`);
    expect(docs.length).toBeGreaterThan(20);
    expect(docs.filter((file) => !shipped.includes(file))).toEqual([]);
    expect(shipped).toContain("CHANGELOG.md");
  });

  it("ships the set-up files the pages point to: wrangler.toml, the SAM template, the OpenTelemetry set-up", () => {
    const shipped = filesUnder(project.installed);
    expect(shipped).toEqual(
      expect.arrayContaining([
        "examples/cloudflare-worker-dedupe/wrangler.toml",
        "examples/lambda-dynamodb/template.yaml",
        "examples/otel/telemetry.ts",
        "examples/postgres/server.ts",
      ]),
    );
    // The NestJS example's tsconfig extends the repository's own, which does not ship.
    expect(shipped).not.toContain("examples/nestjs/tsconfig.json");
  });

  it("resolves every relative link, image and #anchor of every shipped Markdown file inside the package", () => {
    const pages = filesUnder(project.installed).filter((file) => file.endsWith(".md"));
    expect(pages.length).toBeGreaterThan(25);
    const links = pages.flatMap((page) =>
      relativeLinks(readFileSync(join(project.installed, page), "utf8")).map((link) => `${page} → ${link}`),
    );
    expect(links.length).toBeGreaterThan(150);
    expect(pages.flatMap((page) => brokenLinks(project.installed, page).map((link) => `${page} → ${link}`))).toEqual(
      [],
    );
  });

  it("reaches every page from the installed README in one click", () => {
    const fromReadme = new Set(
      relativeLinks(readFileSync(join(project.installed, "README.md"), "utf8")).map((link) => link.split("#")[0]),
    );
    const pages = filesUnder(join(project.installed, "docs")).filter((file) => file.endsWith(".md"));
    expect(pages.filter((page) => !fromReadme.has(`docs/${page}`))).toEqual([]);
  });

  it(`keeps what the documentation adds to the tarball within ${DOCUMENTATION_BUDGET} bytes`, () => {
    const added = execFileSync("tar", ["-czf", "-", "--exclude=./dist", "-C", project.installed, "."]).byteLength;
    console.log(
      `tarball: ${project.tarball.bytes} B, ${project.tarball.files} files; the documentation ${added} B of it (budget ${DOCUMENTATION_BUDGET})`,
    );
    expect(added).toBeLessThanOrEqual(DOCUMENTATION_BUDGET);
  });
});
