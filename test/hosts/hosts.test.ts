import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostsTable, readHosts, withHostsTable } from "../../scripts/hosts-table.js";
import { freePort } from "../support/free-port.js";
import { installPacked } from "../support/packed.js";
import { apps, type Served } from "./apps.js";
import { hosts, root, rootBin } from "./serve.js";

// Each host of the README's table, run for real: the framework's own build and server (or its
// platform's local runtime) from this package's registry packages, with flag-webhooks installed
// from the packed tarball as a user's project gets it. Three deliveries go through each host's
// recipe, signed by flag-webhooks/testing: a valid one (2xx, and the handler saw the typed event),
// a forged one (401 invalid_signature in the service's error shape) and a second copy of the valid
// one (204 with webhook-duplicate: true, the handler not run again).

const table = readHosts();
const SECRET = "whsec_hosts_test";
const started = new Map<string, Promise<Served>>();
const timings: Record<string, Record<string, number>> = {};

// Apps are built and started two at a time, all from the start of the file: most of a build is
// one process waiting on another, so two overlap well on two cores, and each row's tests wait only
// for their own app.
const STARTING_AT_ONCE = 2;
let starting = 0;
const queue: (() => void)[] = [];

async function slot<T>(step: () => Promise<T>): Promise<T> {
  if (starting >= STARTING_AT_ONCE) await new Promise<void>((ok) => queue.push(ok));
  starting++;
  try {
    return await step();
  } finally {
    starting--;
    queue.shift()?.();
  }
}

/** The app a host runs on, built and started once for every row that uses it. */
function app(name: string): Promise<Served> {
  let serving = started.get(name);
  if (!serving) {
    const start = apps[name];
    if (!start) return Promise.reject(new Error(`no driver for the app "${name}" in test/hosts/apps.ts`));
    serving = slot(async () => {
      const began = performance.now();
      const served = await start({ port: await freePort(), secret: SECRET, dir: join(hosts, name) });
      timings[name] = { ...served.timings, total: Math.round(performance.now() - began) };
      return served;
    });
    // Awaited by each row that uses it; a failure is reported there.
    serving.catch(() => {});
    started.set(name, serving);
  }
  return serving;
}

beforeAll(() => {
  if (!existsSync(join(hosts, "node_modules/.package-lock.json"))) {
    throw new Error("test/hosts has no node_modules: run npm install --prefix test/hosts (npm test does)");
  }
  // The packed package, as npm publish ships it, unpacked where every app resolves it from.
  rmSync(join(hosts, "node_modules/flag-webhooks"), { recursive: true, force: true });
  installPacked(hosts);
  // The slowest first.
  for (const name of [
    "next",
    "vercel",
    "nitro",
    "sveltekit",
    "astro",
    "react-router",
    ...table.map((row) => row.app),
  ]) {
    if (apps[name]) void app(name);
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(
    [...started.values()].map((serving) =>
      serving.then(
        (s) => s.stop(),
        () => {},
      ),
    ),
  );
  // The app's own workspace first (h3 v2), then this package's, then the repository's (Bun, Deno).
  const version = (app: string, name: string) => {
    const places = [join(hosts, app), hosts, root].map((dir) => join(dir, "node_modules", name, "package.json"));
    const path = places.find((place) => existsSync(place));
    return path ? (JSON.parse(readFileSync(path, "utf8")).version as string) : "not found";
  };
  const report = table.map((row) => ({
    id: row.id,
    versions: Object.fromEntries(row.packages.map((name) => [name, version(row.app, name)])),
    ms: timings[row.app],
  }));
  mkdirSync(join(root, ".test-results"), { recursive: true });
  writeFileSync(join(root, ".test-results/hosts.json"), `${JSON.stringify(report, null, 2)}\n`);
}, 30_000);

/** Waits until the host printed `line` (its handler's log), or fails with what it printed. */
async function printed(served: Served, line: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!served.output().includes(line)) {
    if (Date.now() > deadline)
      throw new Error(`the handler never printed "${line}"; the host printed:\n${served.output()}`);
    await new Promise((ok) => setTimeout(ok, 25));
  }
}

const occurrences = (text: string, line: string) => text.split(line).length - 1;

describe.each(table.map((row) => [row.host, row] as const))("%s", (_, row) => {
  let served: Served;
  let event: ReturnType<typeof createEvent<"flag.updated">>;
  let delivery: Awaited<ReturnType<typeof signedDelivery>>;
  const line = () => `flag updated: ${event.id} ${event.data.flag}`;
  // A host that could not be built or started fails each of its tests with the reason, rather
  // than leaving them skipped behind a failed hook.
  let failure: unknown;
  const send = (body: string, headers: Record<string, string>) => {
    if (failure) throw failure;
    return fetch(served.url(row.path), { method: "POST", headers, body, signal: AbortSignal.timeout(20_000) });
  };

  beforeAll(async () => {
    event = createEvent("flag.updated", { data: { flag: row.id } });
    delivery = await signedDelivery({ secret: SECRET, event });
    try {
      served = await app(row.app);
    } catch (error) {
      failure = error;
    }
  }, 300_000);

  it("handles a signed delivery: 2xx, and the handler saw the typed event", async () => {
    const response = await send(delivery.body, delivery.headers);
    expect(response.status, await response.clone().text()).toBeGreaterThanOrEqual(200);
    expect(response.status).toBeLessThan(300);
    await printed(served, line());
  });

  it("refuses a forged delivery: 401 invalid_signature in the service's error shape", async () => {
    const forged = await signedDelivery({ secret: "whsec_not_the_secret", event });
    const response = await send(forged.body, forged.headers);
    expect(response.status).toBe(401);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
  });

  it("answers a second copy 204 with webhook-duplicate: true, and runs the handler once", async () => {
    const response = await send(delivery.body, delivery.headers);
    expect(response.status, await response.clone().text()).toBe(204);
    expect(response.headers.get("webhook-duplicate")).toBe("true");
    // A fresh event after the copy: once its line is printed, a line the copy would have
    // printed is too, since the host prints in order.
    const next = createEvent("flag.updated", { data: { flag: row.id } });
    const fresh = await send(
      ...(Object.values(await signedDelivery({ secret: SECRET, event: next })) as [string, Record<string, string>]),
    );
    expect(fresh.status).toBeLessThan(300);
    await printed(served, `flag updated: ${next.id} ${row.id}`);
    expect(occurrences(served.output(), line())).toBe(1);
  });
});

// Next.js API routes and Vercel's (req, res) functions parse the body by default; a route that
// leaves that on must get an answer that says so, not a signature error.
describe.each([
  ["Next.js Pages Router", "next", "/api/parsed"],
  ["Vercel Node.js function", "vercel", "/api/parsed"],
] as const)("%s, with the host's body parser left on", (_, name, path) => {
  it("answers 500 body_already_parsed, in the service's error shape", async () => {
    const served = await app(name);
    const delivery = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const response = await fetch(served.url(path), { method: "POST", headers: delivery.headers, body: delivery.body });
    expect(response.status).toBe(500);
    const { error } = await response.json();
    expect(error).toEqual({
      code: "body_already_parsed",
      message: expect.stringMatching(/^req\.body was already parsed/),
    });
    // The message names the line to add, for the host it is on.
    expect(error.message).toContain("export const config = { api: { bodyParser: false } }");
    expect(error.message).toContain("NODEJS_HELPERS=0");
  });
});

describe("the table of hosts", () => {
  it("has a driver for every app it names, and names every driver", () => {
    expect(Object.keys(apps).sort()).toEqual([...new Set(table.map((row) => row.app))].sort());
  });

  it("is the README's table, as npm run docs:hosts writes it", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    expect(readme).toContain(hostsTable(table));
    expect(withHostsTable(readme, table)).toBe(readme);
  });

  it.each(table.map((row) => [row.host, row] as const))(
    "%s: docs/hosts.md shows the files the test runs, verbatim, in its recipe",
    (_, row) => {
      const page = readFileSync(join(root, "docs/hosts.md"), "utf8");
      const recipe = page.split(/^## /m).find((section) => githubSlug(section.split("\n")[0] ?? "") === row.recipe);
      expect(recipe, `docs/hosts.md has a section whose anchor is #${row.recipe}`).toBeDefined();
      for (const file of row.files) {
        const code = readFileSync(join(hosts, row.app, file), "utf8");
        const lang = { ts: "ts", mts: "ts", tsx: "tsx", json: "json" }[file.split(".").pop() ?? ""];
        expect(recipe).toContain(`\`\`\`${lang} title="${file}"\n${code}\`\`\``);
      }
    },
  );

  // TypeScript 7, the native compiler (tools/typescript-versions), checks these in a fifth of the
  // time TypeScript 6 takes over the frameworks' types.
  const tsc7 = join(root, "tools/typescript-versions/node_modules/typescript7/bin/tsc");
  it.concurrent.each([
    ["the Node apps, with tsc", process.execPath, [tsc7, "-p", "tsconfig.json"]],
    ["the Bun apps, with tsc and Bun's types", process.execPath, [tsc7, "-p", "tsconfig.bun.json"]],
    ["the Deno app, with deno check", rootBin("deno"), ["check", "--no-remote", "deno/server.ts"]],
  ] as const)(
    "type-checks %s, against the packed flag-webhooks and each framework's own types",
    async (_, command, args) => {
      expect(existsSync(tsc7), `${tsc7} is missing: run npm install --prefix tools/typescript-versions`).toBe(true);
      const env = { ...process.env, DENO_DIR: join(tmpdir(), "flag-webhooks-hosts-deno"), NO_COLOR: "1" };
      const { output, code } = await new Promise<{ output: string; code: number | null }>((done) => {
        execFile(command, args, { cwd: hosts, env }, (error, stdout, stderr) =>
          done({ output: `${stdout}${stderr}`, code: error ? (error.code as number | null) : 0 }),
        );
      });
      expect(output.replace(/^Check .*\n/gm, "")).toBe("");
      expect(code).toBe(0);
    },
    120_000,
  );
});

/** A heading's anchor as GitHub makes it (the rule test/readme.test.ts checks links with). */
function githubSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, "")
    .replace(/ /g, "-");
}
