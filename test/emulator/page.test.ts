import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, get, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import express from "express";
import { MemoryDedupeStore, type WebhookEvent } from "flag-webhooks";
import { createEmulator, type Emulator } from "flag-webhooks/emulator";
import { webhookMiddleware } from "flag-webhooks/express";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findPageRoot } from "../../src/emulator/page.js";
import { call } from "../support/emulator.js";
import { close, listen } from "../support/http.js";

// The emulator's page. Its files as a client gets them over HTTP, without a browser: the bytes,
// the headers that lock the page down, HEAD, and nothing served beyond its three files; where the
// files are looked for in each layout (the repository's, the package's dist/ and a chunk of it),
// with real folders. Then the page itself in a real browser: Debian's chromium driven by
// playwright-core, against a real emulator delivering to a real Express app with our middleware.

const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available) {
  const reason = `${CHROMIUM} is missing (install it with: apt-get install chromium)`;
  // In CI a missing browser is a failure, never a skip (.ci/run installs it).
  if (process.env.CI === "true") throw new Error(`the emulator page test needs a browser: ${reason}`);
  console.error(
    `\n${"!".repeat(72)}\n!! NOT RUN: the emulator page browser test, because ${reason}\n${"!".repeat(72)}\n`,
  );
}

const results = resolve(import.meta.dirname, "../../.test-results");

describe.skipIf(!available)("the emulator's page in chromium", () => {
  let browser: Browser;
  let page: Page;
  let emulator: Emulator;
  let app: Server;
  let secret = "";
  const handled: WebhookEvent[] = [];
  const problems: string[] = [];

  beforeAll(async () => {
    const receiving = express();
    // With dedupe, so that a redelivery is answered as a duplicate (Webhook-Duplicate: true).
    const store = new MemoryDedupeStore();
    receiving.post(
      "/webhooks",
      (req, res, next) => webhookMiddleware({ secret, dedupe: { store, ttl: "10m" } })(req, res, next),
      (req, res) => {
        if (req.webhookEvent) handled.push(req.webhookEvent);
        res.json({ ok: true, received: req.webhookEvent?.id });
      },
    );
    app = await listen(receiving.listen(0, "127.0.0.1"));
    const { port } = app.address() as { port: number };
    emulator = await createEmulator({
      retry: { initialDelayMs: 50 },
      actor: { type: "user", email: "dana@example.com" },
    });
    const created = await call(emulator, "POST", "/projects/default/webhooks", {
      body: { url: `http://127.0.0.1:${port}/webhooks`, events: ["flag.created", "flag.updated"] },
    });
    secret = created.json.secret;
    await call(emulator, "POST", "/projects/default/flags", {
      body: { key: "new-checkout", type: "boolean", tags: ["checkout"] },
    });
    await call(emulator, "POST", "/projects/default/flags", {
      body: { key: "search-v2", type: "string", variations: ["classic", "semantic"], tags: ["search"] },
    });
    await emulator.settled();

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(`console: ${message.text()}`);
    });
    await page.goto(emulator.pageUrl);
    await page.getByRole("status").filter({ hasText: "live" }).waitFor();
    // Set once: if the page reloaded, this would be gone.
    await page.evaluate(() => {
      (window as unknown as { notReloaded: boolean }).notReloaded = true;
    });
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    await emulator?.close();
    await close(app);
  });

  const switchOf = (flag: string, env: string) => page.getByRole("switch", { name: `${flag} on in ${env}` });

  it("shows a change made through the API without a reload, and its delivery", async () => {
    await expect.poll(() => switchOf("new-checkout", "production").isChecked()).toBe(false);
    await call(emulator, "PATCH", "/projects/default/flags/new-checkout", {
      body: { environment: "production", on: true, rollout: { percent: 20 } },
    });
    await expect.poll(() => switchOf("new-checkout", "production").isChecked()).toBe(true);
    await expect.poll(() => page.getByLabel("Rollout percent of new-checkout in production").inputValue()).toBe("20");
    const delivery = page.locator('li[data-kind="event"]', { hasText: "flag.updated" }).first();
    await expect.poll(() => delivery.locator(".badge").textContent()).toBe("200");
    await delivery.locator("summary").click();
    const changes = delivery.locator("table.changes");
    await expect.poll(() => changes.locator("caption").textContent()).toBe("Changes by dana@example.com (user)");
    expect(await changes.locator("tbody tr").allInnerTexts()).toEqual([
      "on\tfalse\t→\ttrue",
      "rollout.percent\tnull\t→\t20",
    ]);
    expect(await delivery.locator(".headers").textContent()).toMatch(/service-signature\s*[0-9a-f]{64}/);
    expect(await delivery.locator("pre.body").textContent()).toContain('"type": "flag.updated"');
    expect(await delivery.locator("table.attempts tbody tr").count()).toBe(1);
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
  });

  it("shows a tampered copy refused by the app with 401", async () => {
    const delivery = page.locator('li[data-kind="event"]', { hasText: "flag.updated" }).first();
    await delivery.getByRole("button", { name: "Send tampered copy" }).click();
    const tampered = page.locator('li[data-kind="tampered"]').first();
    await expect.poll(() => tampered.locator(".badge").textContent()).toBe("401 refused");
    await tampered.locator("summary").click();
    await expect
      .poll(() => tampered.locator("table.attempts .response").first().textContent())
      .toContain("invalid_signature");
    expect(handled.filter((e) => e.type === "flag.updated").length).toBe(1);
  });

  it("copies a delivery as a curl command that sends the same bytes and signature", async () => {
    const delivery = page.locator('li[data-kind="event"]', { hasText: "flag.updated" }).last();
    const sent = emulator.deliveries().find((d) => d.kind === "event" && d.event.type === "flag.updated");
    // Opened by the first test already; a click on its summary would close it.
    if ((await delivery.locator("details").getAttribute("open")) === null) await delivery.locator("summary").click();
    await delivery.getByRole("button", { name: "Copy as curl" }).click();
    const curl = delivery.getByLabel("curl command for this delivery");
    await expect.poll(() => curl.isVisible()).toBe(true);
    const command = await curl.inputValue();
    expect(command.split(" \\\n").map((part) => part.trim())).toEqual([
      `curl -X POST '${sent?.url}'`,
      "-H 'content-type: application/json'",
      `-H 'service-signature: ${sent?.request.headers["service-signature"]}'`,
      "-H 'user-agent: flag-webhooks-emulator'",
      `--data-raw '${sent?.request.body}'`,
    ]);
  });

  it("turns a flag on from the page with the keyboard, and a delivery follows", async () => {
    const toggle = switchOf("new-checkout", "staging");
    await toggle.focus();
    await page.keyboard.press("Space");
    await expect
      .poll(async () => (await call(emulator, "GET", "/projects/default/flags")).json.data[1].key)
      .toBe("new-checkout");
    await expect
      .poll(async () => (await call(emulator, "GET", "/projects/default/flags")).json.data[1].environments.staging.on)
      .toBe(true);
    await expect.poll(() => handled.filter((e) => e.type === "flag.updated").length).toBe(2);
    const last = handled.at(-1);
    expect(last?.type === "flag.updated" && [last.environment, last.data.changes]).toEqual([
      "staging",
      [{ path: "on", from: false, to: true }],
    ]);
    const delivery = page.locator('li[data-kind="event"]', { hasText: "staging" }).filter({ hasText: "flag.updated" });
    await expect.poll(() => delivery.locator(".badge").textContent()).toBe("200");
    // Focus stays on the switch after the page re-rendered the table.
    expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe(
      "new-checkout on in staging",
    );
  });

  it("sets a rollout percent from the page: type it and press Enter", async () => {
    const input = page.getByLabel("Rollout percent of search-v2 in staging");
    await input.fill("50");
    await input.press("Enter");
    await expect
      .poll(async () => {
        const { json } = await call(emulator, "GET", "/projects/default/flags?limit=1");
        return json.data[0].environments.staging;
      })
      .toEqual({ on: false, rollout: { percent: 50 } });
    const delivery = page
      .locator('li[data-kind="event"]', { hasText: "search-v2" })
      .filter({ hasText: "flag.updated" });
    await expect.poll(() => delivery.locator(".badge").textContent()).toBe("200");
  });

  it("labels every control, so it can be found and used without a mouse", async () => {
    const unlabelled = await page.evaluate(() =>
      [...document.querySelectorAll("input, select, textarea, button")]
        .filter((control) => {
          const label =
            control.getAttribute("aria-label") ||
            control.closest("label")?.textContent?.trim() ||
            (control.tagName === "BUTTON" ? control.textContent?.trim() : "");
          return !label;
        })
        .map((control) => control.outerHTML),
    );
    expect(unlabelled).toEqual([]);
    expect(await page.locator("[tabindex]").count()).toBe(0); // native focus order only
  });

  it("takes the token from the printed URL's fragment and leaves it out of the address bar", async () => {
    expect(page.url()).toBe(new URL("/", emulator.pageUrl).href);
    expect(page.url()).not.toContain(emulator.token);
    expect(await page.content()).not.toContain(emulator.token);
    expect(await page.locator("#sign-in").isHidden()).toBe(true);
  });

  it("asks for the token when opened without it, refuses a wrong one, and keeps the right one across a reload", async () => {
    const other = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await other.goto(new URL("/", emulator.pageUrl).href);
      const form = other.getByRole("form", { name: "Enter the API token" });
      await form.waitFor();
      expect(await other.locator("#flags tbody tr").count()).toBe(0);
      await form.getByLabel("API token").fill("fwe_not-the-token");
      await form.getByRole("button", { name: "Open the page" }).click();
      await expect.poll(() => form.isVisible()).toBe(true);
      await expect.poll(() => form.locator("p").textContent()).toContain("That token is not the emulator's");
      await form.getByLabel("API token").fill(emulator.token);
      await form.getByRole("button", { name: "Open the page" }).click();
      await other.getByRole("status").filter({ hasText: "live" }).waitFor();
      await expect.poll(() => other.locator("#flags tbody tr").count()).toBe(2);
      await other.reload();
      await other.getByRole("status").filter({ hasText: "live" }).waitFor();
      expect(await form.isHidden()).toBe(true);
      await expect.poll(() => other.locator("#flags tbody tr").count()).toBe(2);
    } finally {
      await other.close();
    }
  });

  it("shows each attempt's response headers: a redelivery answered as a duplicate says so", async () => {
    const original = page.locator('li[data-kind="event"]', { hasText: "flag.updated" }).last();
    if ((await original.locator("details").getAttribute("open")) === null) await original.locator("summary").click();
    await original.getByRole("button", { name: "Redeliver" }).click();
    const redelivery = page.locator('li[data-kind="redelivery"]').first();
    await expect.poll(() => redelivery.locator(".badge").textContent()).toBe("204");
    await redelivery.locator("summary").click();
    const headers = redelivery.getByLabel("Response headers of attempt 1");
    await expect.poll(() => headers.locator("dt").allTextContents()).toContain("webhook-duplicate");
    expect(await headers.locator("dt", { hasText: "webhook-duplicate" }).locator("+ dd").textContent()).toBe("true");
    // The first delivery's answer came from Express: its headers are shown too.
    expect(await original.getByLabel("Response headers of attempt 1").textContent()).toContain(
      "application/json; charset=utf-8",
    );
  });

  it("wraps a long body line at 1280 px instead of cutting it", async () => {
    await page.setViewportSize({ width: 1280, height: 1000 });
    try {
      await call(emulator, "PATCH", "/projects/default/flags/search-v2", {
        body: { environment: "development", on: true, comment: `ticket-${"x".repeat(600)}-end` },
      });
      const delivery = page.locator('li[data-kind="event"]', { hasText: "search-v2" }).first();
      await expect.poll(() => delivery.locator(".badge").textContent()).toBe("200");
      await delivery.locator("summary").click();
      const body = delivery.locator("pre.body");
      await expect.poll(() => body.textContent()).toContain("-end");
      const sizes = await body.evaluate((pre) => ({ scroll: pre.scrollWidth, client: pre.clientWidth }));
      expect(sizes.scroll).toBeLessThanOrEqual(sizes.client);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1280);
      await delivery.locator("summary").click();
    } finally {
      await page.setViewportSize({ width: 1440, height: 1000 });
    }
  });

  it("registers a webhook from the page and shows its secret once", async () => {
    await page.getByLabel("URL", { exact: true }).fill("http://localhost:3999/webhooks");
    await page.getByRole("button", { name: "Register webhook" }).click();
    const secretText = page.locator("#secret-value");
    await expect.poll(() => secretText.textContent()).toMatch(/^whsec_[0-9a-f]{48}$/);
    await expect.poll(() => page.locator("#webhooks li").count()).toBe(2);
    expect(await page.locator("#webhooks").textContent()).not.toContain("whsec_");

    // The picture for docs/emulator.md: the page after a few changes, one delivery opened.
    await page.getByRole("button", { name: "Hide" }).click();
    await page
      .locator("li", { hasText: "localhost:3999" })
      .getByRole("button", { name: /Delete webhook/ })
      .click();
    await expect.poll(() => page.locator("#webhooks li").count()).toBe(1);
    await expect.poll(() => page.locator("#deliveries > li").count()).toBeGreaterThanOrEqual(10);
    await page.locator("#toast").evaluate((toast) => {
      toast.style.transition = "none";
      toast.classList.remove("shown");
    }); // a passing notice, not page content
    mkdirSync(results, { recursive: true });
    await page.screenshot({ path: resolve(results, "emulator-page.png"), fullPage: true });
    expect(problems).toEqual([]);
  });
});

const source = (file: string) => readFileSync(new URL(`../../src/emulator/page/${file}`, import.meta.url), "utf8");

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

describe("the page's files over HTTP, without a browser", () => {
  let emulator: Emulator;
  let origin = "";
  beforeAll(async () => {
    emulator = await createEmulator();
    origin = new URL(emulator.url).origin;
  });
  afterAll(() => emulator.close());

  describe("what is served", () => {
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
