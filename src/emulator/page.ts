import { existsSync, readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// The page is three static files, shipped as files: src/emulator/page/ in the repository,
// dist/emulator-page/ in the package (tsup.config.ts copies them). No build step, no framework.
const FILES = new Map<string, PageFile>([
  ["/", { file: "index.html", type: "text/html; charset=utf-8" }],
  ["/page.css", { file: "page.css", type: "text/css; charset=utf-8" }],
  ["/page.js", { file: "page.js", type: "text/javascript; charset=utf-8" }],
]);

/** One of the page's files: its name in the page's folder and its Content-Type. */
export interface PageFile {
  file: string;
  type: string;
}

let root: string | undefined;

/** The folder holding the page's files, next to this module in the repository or in dist/. */
function pageRoot(): string {
  // The CommonJS build rewrites import.meta.url as this file's URL (test/package.test.ts serves the
  // page through import and require).
  root ??= findPageRoot(dirname(fileURLToPath(import.meta.url)));
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

/** HTML-escaped: the page shows the API's URL, which holds none of these characters, but never unescaped. */
const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The page's file at `path`, if it is one. */
export function pageFile(path: string): PageFile | undefined {
  return FILES.get(path);
}

/**
 * Serves one of the page's files. No token in them: the page takes it from its URL's fragment
 * (#token=…), which browsers never send, so a request to the port learns nothing from the page.
 */
export function servePage(page: PageFile, res: ServerResponse, values: { url: string }): void {
  const body = readFileSync(join(pageRoot(), page.file), "utf8").replaceAll("{{url}}", escapeHtml(values.url));
  res.writeHead(200, {
    "content-type": page.type,
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    // The page runs only its own script and talks only to this server.
    "content-security-policy":
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  });
  res.end(body);
}
