import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { SIGNATURE_HEADER, verifySignature } from "flag-webhooks";
import { beforeAll, describe, expect, it } from "vitest";
import { cleanupAfterEach, tempDir as makeTempDir } from "../support/cleanup.js";
import { receiver, until } from "../support/emulator.js";

// `flag-webhooks dev` as a developer runs it (the built dist/cli.js in a child process): what it
// checks before it starts (a port, a host, a token and a state file it can use), and what a
// restart with --state keeps.

const root = resolve(import.meta.dirname, "../..");
const cleanup = cleanupAfterEach();

beforeAll(() => {
  if (!existsSync(join(root, "dist/cli.js"))) throw new Error("dist is not built: run npx tsup (npm test does) first");
});

interface Dev {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function dev(args: string[], env: Record<string, string> = {}): Dev {
  const child = spawn(process.execPath, ["dist/cli.js", "dev", ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk;
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    err += chunk;
  });
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  cleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return { child, out: () => out, err: () => err, exited };
}

async function started(run: Dev): Promise<{ api: string; token: string }> {
  await until(() => run.out().includes("Ctrl+C"), 20_000).catch(() => {
    throw new Error(`dev did not start: ${run.out()}${run.err()}`);
  });
  const api = /API +(http:\/\/\S+\/v2)\n/.exec(run.out())?.[1] ?? "";
  const token = /token +(\S+)\n/.exec(run.out())?.[1] ?? "";
  return { api, token };
}

const tempDir = () => makeTempDir(cleanup, "flag-webhooks-dev-");

/** A usage error as the command prints it: one line saying why, a hint, exit 2, nothing on stdout. */
async function expectUsageError(run: Dev, message: string | RegExp) {
  expect(await run.exited).toBe(2);
  const lines = run.err().trimEnd().split("\n");
  expect(lines[0]).toMatch(typeof message === "string" ? `flag-webhooks: ${message}` : message);
  expect(lines.slice(1)).toEqual(['Run "flag-webhooks dev --help" for usage.']);
  expect(run.out()).toBe("");
}

describe("flag-webhooks dev --state", () => {
  it("reuses the stored --forward webhook and its secret on a restart: the app gets each event once, signed as before", async () => {
    const app = await receiver(() => 204);
    cleanup(app.close);
    const state = join(tempDir(), "dev.json");
    const args = ["--port", "0", "--forward", app.url, "--state", state];

    const first = dev(args);
    await started(first);
    const secret = /secret +(whsec_[0-9a-f]+)\n/.exec(first.out())?.[1] ?? "";
    const webhook = /webhook (wh_[0-9a-f]+) →/.exec(first.out())?.[1] ?? "";
    expect([secret, webhook].every(Boolean)).toBe(true);
    first.child.kill("SIGINT");
    expect(await first.exited).toBe(0);

    const second = dev(args);
    const { api, token } = await started(second);
    expect(second.out()).toContain(`webhook ${webhook} → ${app.url}`);
    expect(second.out()).toContain(`kept in ${state}`);
    expect(second.out()).not.toContain("whsec_");
    const saved = JSON.parse(readFileSync(state, "utf8"));
    expect(saved.projects.map((p: { webhooks: unknown[] }) => p.webhooks.length)).toEqual([1]);

    const created = await fetch(`${api}/projects/default/flags`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ key: "dark-mode", type: "boolean" }),
    });
    expect(created.status).toBe(201);
    await until(() => app.requests.length >= 3, 10_000);
    await new Promise((r) => setTimeout(r, 200)); // a second webhook would have been as quick
    expect(app.requests.length).toBe(3); // flag.created in three environments, once each
    for (const request of app.requests) {
      const signature = request.headers[SIGNATURE_HEADER];
      expect(await verifySignature({ secret, payload: request.body, signature })).toBe(true);
    }
    second.child.kill("SIGINT");
    expect(await second.exited).toBe(0);
  });

  it("refuses a file in a folder that does not exist, before starting", async () => {
    const dir = tempDir();
    await expectUsageError(
      dev(["--port", "0", "--state", join(dir, "missing/dev.json")]),
      `--state: cannot read the state file ${join(dir, "missing/dev.json")}: its folder ${join(dir, "missing")} does not exist`,
    );
  });

  it("refuses a file that is not JSON, saying so", async () => {
    const file = join(tempDir(), "broken.json");
    writeFileSync(file, "this is not json");
    await expectUsageError(
      dev(["--port", "0", "--state", file]),
      new RegExp(`^flag-webhooks: --state: cannot read the state file ${file}: it is not JSON \\(.+\\)$`),
    );
  });

  it("exits on the first Ctrl+C even when the state file can no longer be written", async () => {
    const dir = tempDir();
    const run = dev(["--port", "0", "--state", join(dir, "dev.json")]);
    const { api, token } = await started(run);
    rmSync(dir, { recursive: true, force: true });
    await fetch(`${api}/projects/default/flags`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ key: "f", type: "boolean" }),
    });
    run.child.kill("SIGINT");
    expect(await run.exited).toBe(0);
    expect(run.out()).toContain("flag-webhooks dev: stopped");
    expect(run.err()).toContain("could not save");
    expect(run.err()).not.toContain("unexpected error");
  });
});

describe("flag-webhooks dev checks before it prints", () => {
  it("refuses a token with spaces, from --token or the environment", async () => {
    await expectUsageError(
      dev(["--port", "0", "--token", "my secret token"]),
      "--token must be 8 to 200 visible ASCII characters, without spaces",
    );
    await expectUsageError(
      dev(["--port", "0"], { FLAG_WEBHOOKS_EMULATOR_TOKEN: "my secret token" }),
      "$FLAG_WEBHOOKS_EMULATOR_TOKEN must be 8 to 200 visible ASCII characters, without spaces",
    );
  });

  it("refuses a --forward URL the emulator cannot post to, before printing the page, API or token", async () => {
    await expectUsageError(
      dev(["--port", "0", "--forward", "http://example.com/webhooks"]),
      "--forward must be an https:// URL, or http:// to localhost, 127.0.0.1 or [::1]",
    );
    await expectUsageError(dev(["--port", "0", "--project", "a b"]), "--project must be 1-100 letters");
  });

  it("refuses a --host that is no address of this machine", async () => {
    await expectUsageError(dev(["--port", "0", "--host", "198.51.100.7"]), "--host 198.51.100.7 is not an address");
  });
});
