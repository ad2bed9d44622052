import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, get } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator, type Emulator } from "flag-webhooks/emulator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findPageRoot } from "../../src/emulator/page.js";

// The page's files as a client gets them over HTTP, without a browser (test/emulator/page.test.ts
// drives the page itself in Chromium): the bytes, the headers that lock the page down, HEAD, and
// nothing served beyond its three files; and where the files are looked for in each layout (the
// repository's, the package's dist/ and a chunk of it), with real folders.

let emulator: Emulator;
let origin = "";
beforeAll(async () => {
  emulator = await createEmulator();
  origin = new URL(emulator.url).origin;
});
afterAll(() => emulator.close());

const source = (file: string) => readFileSync(new URL(`../../src/emulator/page/${file}`, import.meta.url), "utf8");

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

describe("the page's files", () => {
  it.each([
    ["/", "index.html", "text/html; charset=utf-8"],
    ["/page.css", "page.css", "text/css; charset=utf-8"],
    ["/page.js", "page.js", "text/javascript; charset=utf-8"],
  ])(
    "serves %s: the file's bytes (the API's URL in the HTML), with headers that lock it down",
    async (path, file, type) => {
      const answer = await fetch(`${origin}${path}`);
      const body = await answer.text();
      const expected = file === "index.html" ? source(file).replaceAll("{{url}}", emulator.url) : source(file);
      expect(body).toBe(expected);
      expect(Object.fromEntries(answer.headers)).toMatchObject({
        "content-type": type,
        "content-length": String(Buffer.byteLength(expected)),
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "content-security-policy": CSP,
      });
    },
  );

  it("serves the page's three files over one keep-alive connection, as a browser loads them", async () => {
    // Nothing after a file's answer may cut the connection: the browser's next file reuses it.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const reused: boolean[] = [];
      for (const path of ["/", "/page.css", "/page.js"]) {
        const status = await new Promise<number>((resolve, reject) => {
          const req = get(`${origin}${path}`, { agent }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
          });
          req.on("socket", () => reused.push(req.reusedSocket));
          req.on("error", reject);
        });
        expect(status).toBe(200);
        // Let the socket go back to the agent's pool before the next request.
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(reused).toEqual([false, true, true]);
    } finally {
      agent.destroy();
    }
  });

  it("puts the API's URL in the HTML as it is (it has nothing to escape)", async () => {
    const html = await fetch(`${origin}/`).then((res) => res.text());
    expect(html).toContain(`<meta name="emulator-url" content="${emulator.url}">`);
    expect(html).toContain(`<code id="api-url">${emulator.url}</code>`);
    expect(html).not.toContain("{{url}}");
  });

  it("answers HEAD with the headers of GET and no body", async () => {
    const answer = await fetch(`${origin}/page.js`, { method: "HEAD" });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-length")).toBe(String(Buffer.byteLength(source("page.js"))));
    expect(answer.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(await answer.text()).toBe("");
  });

  it("serves nothing else: not the files under other names, nor the folder's other paths", async () => {
    for (const path of [
      "/index.html",
      "/page",
      "/page.jsx",
      "/page.css/",
      "/emulator-page/index.html",
      "/page/page.js",
    ]) {
      const answer = await fetch(`${origin}${path}`);
      expect([path, answer.status, await answer.json()]).toEqual([
        path,
        404,
        { error: { code: "not_found", message: `nothing at GET ${path}` } },
      ]);
    }
  });
});

describe("where the page's files are looked for", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "emulator-page-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A folder `name` under the test's folder, with the given files (path -> content). */
  function layout(name: string, files: string[]): string {
    const root = join(dir, name);
    for (const file of files) {
      mkdirSync(join(root, file, ".."), { recursive: true });
      writeFileSync(join(root, file), "<!doctype html>");
    }
    return root;
  }

  it("takes emulator-page/ beside the module (the package's dist/) first", () => {
    const root = layout("first", ["dist/emulator-page/index.html", "dist/page/index.html"]);
    expect(findPageRoot(join(root, "dist"))).toBe(join(root, "dist/emulator-page"));
  });

  it("takes emulator-page/ one level up (a chunk in a subfolder of dist/)", () => {
    const root = layout("chunk", ["dist/emulator-page/index.html", "dist/chunks/page/index.html"]);
    expect(findPageRoot(join(root, "dist/chunks"))).toBe(join(root, "dist/emulator-page"));
  });

  it("takes page/ beside the module (the repository's src/emulator/), and passes over folders without index.html", () => {
    const root = layout("source", [
      "emulator/emulator-page/page.css",
      "emulator-page/page.js",
      "emulator/page/index.html",
    ]);
    expect(findPageRoot(join(root, "emulator"))).toBe(join(root, "emulator/page"));
  });

  it("says where it looked when the files are missing", () => {
    const here = join(layout("none", ["emulator/other/index.html"]), "emulator");
    expect(() => findPageRoot(here)).toThrow(
      new Error(
        `flag-webhooks/emulator: the page's files are missing (looked in ${join(here, "emulator-page")}, ${join(here, "../emulator-page")}, ${join(here, "page")})`,
      ),
    );
  });
});
