import { existsSync, readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// The page is three static files, shipped as files: src/emulator/page/ in the repository,
// dist/emulator-page/ in the package (tsup.config.ts copies them). No build step, no framework.
const FILES = new Map<string, { file: string; type: string }>([
  ["/", { file: "index.html", type: "text/html; charset=utf-8" }],
  ["/page.css", { file: "page.css", type: "text/css; charset=utf-8" }],
  ["/page.js", { file: "page.js", type: "text/javascript; charset=utf-8" }],
]);

let root: string | undefined;

/** The folder holding the page's files, next to this module in the repository or in dist/. */
function pageRoot(): string {
  // Stryker disable next-line ConditionalExpression: a cache: looking again finds the same folder
  if (root) return root;
  // The CommonJS build rewrites import.meta.url as this file's URL (test/package.test.ts serves the
  // page through import and require).
  root = findPageRoot(dirname(fileURLToPath(import.meta.url)));
  return root;
}

/**
 * Where the page's files are for a module in the folder `here`: `emulator-page/` beside it (the
 * package's dist/), or one level up (a chunk of dist/ in a subfolder), or `page/` beside it (the
 * repository's src/emulator/). The first folder holding an index.html wins.
 */
export function findPageRoot(here: string): string {
  const candidates = [join(here, "emulator-page"), join(here, "../emulator-page"), join(here, "page")];
  const found = candidates.find((dir) => existsSync(join(dir, "index.html")));
  if (!found)
    throw new Error(`flag-webhooks/emulator: the page's files are missing (looked in ${candidates.join(", ")})`);
  return found;
}

// Stryker disable next-line ArrowFunction,StringLiteral: the URL escaped is http://<address>:<port>/v2, which has none of these characters; the escape is for safety
const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Serves one of the page's files; false when `path` is not one of them. */
export function servePage(path: string, res: ServerResponse, values: { url: string }): boolean {
  const entry = FILES.get(path);
  if (!entry) return false;
  let body = readFileSync(join(pageRoot(), entry.file), "utf8");
  // Stryker disable next-line ConditionalExpression: page.css and page.js have no {{url}} to replace
  if (entry.file === "index.html") {
    // No token in here: the page takes it from its URL's fragment (#token=…), which browsers never
    // send, so a request to the port learns nothing from the page.
    body = body.replaceAll("{{url}}", escapeHtml(values.url));
  }
  res.writeHead(200, {
    "content-type": entry.type,
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    // The page runs only its own script and talks only to this server.
    "content-security-policy":
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  });
  res.end(body);
  // Stryker disable next-line BooleanLiteral: equivalent: false would only make the caller's 404 reach sendError, which destroys a response Node has finished and detached from its socket by then (the keep-alive test in test/emulator/mutation-page.test.ts shows the connection stays)
  return true;
}
