import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { SIGNATURE_HEADER, verifySignature } from "flag-webhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { receiver, until } from "../support/emulator.js";
import { freePort } from "../support/free-port.js";

// `flag-webhooks dev` run in-process through main(), the way bin.ts runs it: what it prints and
// forwards, how it stops, and the ways it ends with an error, leaving neither its port nor a
// signal handler behind. dev-process.test.ts runs the built binary in a child process, which
// mutation testing cannot see. Ctrl+C is the process's SIGINT event, emitted here to the listener
// the command installs (no other listener of SIGINT exists in a test worker: checked before each emit).

interface Dev {
  out: () => string;
  err: () => string;
  exited: Promise<number>;
}

function dev(args: string[], env: Record<string, string> = {}): Dev {
  let out = "";
  let err = "";
  const stream = (add: (text: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        add(String(chunk));
        done();
      },
    });
  const exited: Promise<number> = main(["dev", ...args], {
    env,
    stdin: Readable.from([]),
    stdout: stream((text) => {
      out += text;
    }),
    stderr: stream((text) => {
      err += text;
    }),
  });
  running.add(exited);
  void exited.finally(() => running.delete(exited));
  return { out: () => out, err: () => err, exited };
}

const running = new Set<Promise<number>>();

async function started(run: Dev): Promise<{ api: string; token: string; page: string }> {
  await Promise.race([
    until(() => run.out().includes("Ctrl+C to stop."), 10_000),
    run.exited.then((code) => {
      throw new Error(`dev exited ${code}: ${run.out()}${run.err()}`);
    }),
  ]);
  return {
    page: /page +(http:\/\/\S+)\n/.exec(run.out())?.[1] ?? "",
    api: /API +(http:\/\/\S+\/v2)\n/.exec(run.out())?.[1] ?? "",
    token: /token +(\S+)\n/.exec(run.out())?.[1] ?? "",
  };
}

async function stop(run: Dev, signal: "SIGINT" | "SIGTERM" = "SIGINT"): Promise<number> {
  expect(process.listenerCount(signal)).toBe(1);
  process.emit(signal);
  const code = await run.exited;
  expect(process.listenerCount("SIGINT") + process.listenerCount("SIGTERM")).toBe(0);
  return code;
}

async function expectUsageError(run: Dev, message: string) {
  expect(await run.exited).toBe(2);
  expect(run.err()).toBe(`flag-webhooks: ${message}\nRun "flag-webhooks dev --help" for usage.\n`);
  expect(run.out()).toBe("");
}

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-dev-src-"));
  dirs.push(dir);
  return dir;
}
let busy: Server;
let busyPort: number;
beforeAll(async () => {
  busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
  busyPort = (busy.address() as AddressInfo).port;
});
afterEach(async () => {
  // A failed test may leave a dev run going: stop it, so that the next test starts clean.
  for (let i = 0; i < 50 && running.size > 0; i++) {
    if (process.listenerCount("SIGINT") > 0) process.emit("SIGINT");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
afterAll(async () => {
  await new Promise((resolve) => busy.close(resolve));
});

describe("flag-webhooks dev, in-process", () => {
  it("prints the page, API and token, forwards every event signed with the printed secret, logs each delivery, and stops on Ctrl+C", async () => {
    const app = await receiver(() => 202);
    try {
      const run = dev(["--port", "0", "--forward", app.url, "--token", "dev-token-123"]);
      const { api, token, page } = await started(run);
      expect(token).toBe("dev-token-123");
      expect(api).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v2$/);
      expect(page).toBe(`${new URL(api).origin}/#token=dev-token-123`);
      const lines = run.out().split("\n");
      expect(lines.slice(0, 4)).toEqual([
        "flag-webhooks emulator",
        `  page   ${page}`,
        `  API    ${api}`,
        "  token  dev-token-123",
      ]);
      expect(lines[4]).toMatch(
        new RegExp(`^ {2}webhook wh_[0-9a-f]+ → ${app.url} \\(project default, every event, every environment\\)$`),
      );
      const secret = /^ {2}secret (whsec_[0-9a-f]+)$/.exec(lines[5] ?? "")?.[1] ?? "";
      expect(secret).not.toBe("");
      expect(lines.slice(6)).toEqual([
        "         shown once: give it to your app as its webhook secret",
        "Ctrl+C to stop.",
        "",
        "",
      ]);
      expect(run.err()).toBe("");

      const created = await fetch(`${api}/projects/default/flags`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ key: "dark-mode", type: "boolean" }),
      });
      expect(created.status).toBe(201);
      await until(() => app.requests.length >= 3, 10_000);
      for (const request of app.requests) {
        expect(
          await verifySignature({ secret, payload: request.body, signature: request.headers[SIGNATURE_HEADER] }),
        ).toBe(true);
        expect(JSON.parse(request.body).type).toBe("flag.created");
      }
      await until(
        () =>
          run
            .out()
            .split("\n")
            .filter((line) => line.includes("flag.created")).length >= 3,
      );
      const logged = run
        .out()
        .split("\n")
        .filter((line) => line.includes("flag.created"));
      for (const environment of ["production", "staging", "development"]) {
        expect(logged).toContainEqual(
          expect.stringMatching(
            new RegExp(`^\\d\\d:\\d\\d:\\d\\d {2}flag\\.created ${environment} → ${app.url} {2}202 in [\\d.]+ ms$`),
          ),
        );
      }
      expect(await stop(run)).toBe(0);
      expect(run.out().endsWith("flag-webhooks dev: stopped\n")).toBe(true);
      // Stopped means closed: the API no longer answers.
      await expect(fetch(`${api}/projects/default/flags`)).rejects.toThrow();
    } finally {
      await app.close();
    }
  });

  it("logs a failed attempt with the next one's time, and a redelivery as such; SIGTERM stops it too", async () => {
    const app = await receiver((n) => (n === 1 ? 500 : 204));
    try {
      const run = dev(["--port", "0", "--forward", app.url, "--project", "shop.v2_x-1"]);
      const { api, token } = await started(run);
      expect(token).toMatch(/^fwe_/);
      expect(run.out()).toContain("(project shop.v2_x-1, every event, every environment)");
      const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      const made = await fetch(`${api}/projects/shop.v2_x-1/flags`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ key: "solo", type: "boolean", environments: undefined }),
      });
      expect(made.status).toBe(201);
      await until(() => /500 in [\d.]+ ms, attempt 2 at \d\d:\d\d:\d\d\n/.test(run.out()), 10_000);
      const origin = new URL(api).origin;
      const list = (await (await fetch(`${origin}/_emulator/state`, { headers: auth })).json()) as {
        deliveries: { id: string }[];
      };
      const id = list.deliveries.at(-1)?.id;
      const again = await fetch(`${origin}/_emulator/deliveries/${id}/redeliver`, { method: "POST", headers: auth });
      expect(again.status).toBeLessThan(300);
      await until(() => /flag\.created \w+ \(redelivery\) → /.test(run.out()), 10_000);
      expect(await stop(run, "SIGTERM")).toBe(0);
    } finally {
      await app.close();
    }
  });

  it("with --state, a restart reuses the forward webhook and says where its secret is kept", async () => {
    const app = await receiver(() => 204);
    try {
      const state = join(tempDir(), "dev.json");
      const first = dev(["--port", "0", "--forward", app.url, "--state", state]);
      await started(first);
      const webhook = /webhook (wh_[0-9a-f]+) →/.exec(first.out())?.[1] ?? "";
      expect(webhook).not.toBe("");
      expect(await stop(first)).toBe(0);

      const second = dev(["--port", "0", "--forward", app.url, "--state", state]);
      await started(second);
      expect(second.out()).toContain(
        `  webhook ${webhook} → ${app.url} (project default, every event, every environment)\n`,
      );
      expect(second.out()).toContain(
        `         kept in ${state}: its secret is the one printed when it was registered\n`,
      );
      expect(second.out()).not.toContain("whsec_");
      expect(await stop(second)).toBe(0);
      const saved = JSON.parse(readFileSync(state, "utf8"));
      expect(saved.projects.map((p: { webhooks: unknown[] }) => p.webhooks.length)).toEqual([1]);

      // Another URL gets a webhook of its own, and its secret is shown.
      const other = await receiver(() => 204);
      try {
        const fourth = dev(["--port", "0", "--forward", other.url, "--state", state]);
        await started(fourth);
        expect(fourth.out()).not.toContain(`webhook ${webhook} →`);
        expect(fourth.out()).toMatch(new RegExp(` {2}webhook wh_[0-9a-f]+ → ${other.url} \\(project default`));
        expect(fourth.out()).toMatch(/ {2}secret whsec_[0-9a-f]+\n/);
        expect(await stop(fourth)).toBe(0);
      } finally {
        await other.close();
      }

      // Another project gets a webhook of its own, and its secret is shown.
      const third = dev(["--port", "0", "--forward", app.url, "--state", state, "--project", "other"]);
      await started(third);
      expect(third.out()).toMatch(/ {2}secret whsec_[0-9a-f]+\n/);
      expect(await stop(third)).toBe(0);
    } finally {
      await app.close();
    }
  });

  it("takes its token from the environment; without --forward it prints no webhook", async () => {
    const run = dev(["-p", "0"], { FLAG_WEBHOOKS_EMULATOR_TOKEN: "env-token-456" });
    const { token } = await started(run);
    expect(token).toBe("env-token-456");
    expect(run.out()).not.toContain("  webhook ");
    expect(run.out()).not.toContain("  secret ");
    expect(await stop(run)).toBe(0);
  });

  it("warns when it listens beyond loopback", async () => {
    const run = dev(["--port", "0", "--host", "0.0.0.0"]);
    await started(run);
    expect(run.err()).toBe(
      "flag-webhooks dev: listening on 0.0.0.0: anyone who can reach it can use the API with the token; the page and API answer only requests addressed to this address or to loopback\n",
    );
    expect(await stop(run)).toBe(0);
    const local = dev(["--port", "0", "--host", "::1"]);
    await started(local);
    expect(local.err()).toBe("");
    expect(await stop(local)).toBe(0);
  });

  it("takes the highest port number", async () => {
    const run = dev(["--port", "65535"]);
    // Free, it starts there; taken, it says so: either way the number is not refused.
    const code = await Promise.race([
      run.exited,
      until(() => run.out().includes("Ctrl+C"), 10_000).then(() => stop(run)),
    ]);
    expect(code === 0 ? run.out() : run.err()).toContain(code === 0 ? ":65535/v2" : "port 65535 is in use");
  });

  it("exits 1 when its port is in use", async () => {
    const run = dev(["--port", String(busyPort)]);
    expect(await run.exited).toBe(1);
    expect(run.err()).toBe(`flag-webhooks: port ${busyPort} is in use; pass --port <port>\n`);
    expect(run.out()).toBe("");
    expect(process.listenerCount("SIGINT")).toBe(0);
  });

  it("refuses what the user typed wrongly, before starting or printing anything", async () => {
    const cases: [string[], string, Record<string, string>?][] = [
      [["--port", "http"], '--port must be a port number, not "http"'],
      [["--port", "65536"], '--port must be a port number, not "65536"'],
      [["--port", "123456"], '--port must be a port number, not "123456"'],
      [["--port", "-"], '--port must be a port number, not "-"'],
      [["--port", "1e3"], '--port must be a port number, not "1e3"'],
      [["--port", " 80"], '--port must be a port number, not " 80"'],
      [["--forward", "localhost:3000"], "--forward must be an http:// or https:// URL"],
      [["--forward", "not a url"], '--forward must be a URL such as http://localhost:3000/webhooks, not "not a url"'],
      [["--forward", "ftp://127.0.0.1/x"], "--forward must be an http:// or https:// URL"],
      [
        ["--forward", "http://example.com/webhooks"],
        "--forward must be an https:// URL, or http:// to localhost, 127.0.0.1 or [::1] (plain HTTP goes only to this machine)",
      ],
      [["--forward", "https://user:pw@example.com/"], "--forward must not contain credentials"],
      [["--forward", "https://user@example.com/"], "--forward must not contain credentials"],
      [["--forward", "https://:pw@example.com/"], "--forward must not contain credentials"],
      [
        ["--project", "a b"],
        '--project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit, not "a b"',
      ],
      [
        ["--project=-x"],
        '--project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit, not "-x"',
      ],
      [
        ["--project", "p".repeat(101)],
        `--project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit, not "${"p".repeat(101)}"`,
      ],
      [["--state", ""], "--state needs a file path"],
      [
        ["--token", "my secret token"],
        "--token must be 8 to 200 visible ASCII characters, without spaces (it is sent as Authorization: Bearer <token>)",
      ],
      [
        [],
        "$FLAG_WEBHOOKS_EMULATOR_TOKEN must be 8 to 200 visible ASCII characters, without spaces (it is sent as Authorization: Bearer <token>)",
        { FLAG_WEBHOOKS_EMULATOR_TOKEN: "short" },
      ],
      [
        ["--token", "short"],
        "--token must be 8 to 200 visible ASCII characters, without spaces (it is sent as Authorization: Bearer <token>)",
        { FLAG_WEBHOOKS_EMULATOR_TOKEN: "env-token-456" },
      ],
      [["--host", "198.51.100.7"], "--host 198.51.100.7 is not an address of this machine"],
      [["--host", "no-such-host.invalid"], "--host no-such-host.invalid is not an address of this machine"],
      [["--host", "no such host"], '--host is not an address: "no such host"'],
    ];
    for (const [args, message, env] of cases) {
      await expectUsageError(dev(["--port", "0", ...args], env), message);
    }
    const dir = tempDir();
    await expectUsageError(
      dev(["--port", "0", "--state", join(dir, "missing/dev.json")]),
      `--state: cannot read the state file ${join(dir, "missing/dev.json")}: its folder ${join(dir, "missing")} does not exist`,
    );
    expect(process.listenerCount("SIGINT")).toBe(0);
  });
});

/** Whether a server can listen on the port (so nothing else holds it). */
async function canListen(port: number): Promise<boolean> {
  const server: Server = createServer();
  const ok = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => resolve(true));
  });
  if (ok) await new Promise((resolve) => server.close(resolve));
  return ok;
}

/** The error code Node's listen gives for the address, or "" when it can listen there. */
async function listenError(host: string): Promise<string> {
  const server = createServer();
  const code = await new Promise<string>((resolve) => {
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "?"));
    server.listen(0, host, () => resolve(""));
  });
  if (code === "") await new Promise((resolve) => server.close(resolve));
  return code;
}
const linkLocal = await listenError("fe80::1");

describe("flag-webhooks dev, when it ends with an error", () => {
  it("reports the API's refusal of the --forward webhook in its words, closes the emulator and leaves no signal handler", async () => {
    // The emulator's API takes request bodies up to 1 MiB; --forward has no length limit of its
    // own, so a URL longer than that is the API's to refuse, after the emulator started.
    const port = await freePort();
    const url = `https://example.com/${"a".repeat(1024 * 1024)}`;
    const run = dev(["--port", String(port), "--forward", url]);
    await expectUsageError(run, "--forward: the request body is larger than 1 MiB");
    expect(process.listenerCount("SIGINT") + process.listenerCount("SIGTERM")).toBe(0);
    // Closed: its port is free again.
    expect(await canListen(port)).toBe(true);
  });

  it.runIf(linkLocal === "EINVAL")(
    "refuses --host with an IPv6 link-local address (Node cannot listen on it without a zone) as a usage mistake",
    async () => {
      await expectUsageError(
        dev(["--port", "0", "--host", "fe80::1"]),
        "--host fe80::1 is not an address of this machine",
      );
      expect(process.listenerCount("SIGINT")).toBe(0);
    },
  );

  it("reports a --state path as typed, even one with --token in it, when the token comes from the environment", async () => {
    const dir = tempDir();
    const file = join(dir, "keep--token", "dev.json");
    await expectUsageError(
      dev(["--port", "0", "--state", file], { FLAG_WEBHOOKS_EMULATOR_TOKEN: "env-token-456" }),
      `--state: cannot read the state file ${file}: its folder ${join(dir, "keep--token")} does not exist`,
    );
  });
});
