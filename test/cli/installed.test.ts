import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.js";
import { close, listen, urlOf } from "../support/http.js";
import { packedTarball } from "../support/packed.js";
import { type SendTargets, startSendTargets } from "../support/send-targets.js";

// The `flag-webhooks` command as users get it: the packed tarball installed with npm into a
// fresh project, run as node_modules/.bin/flag-webhooks (through its #!/usr/bin/env node line),
// against real receivers on loopback. Signatures are checked against openssl's.
const root = resolve(import.meta.dirname, "../..");
const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
const SECRET = "cli-test-secret-7f3a9c";
const extraNodes = join(root, "tools/node-versions/node_modules");

let project: string;
let bin: string;
// The Express example as a user's receiver, a recorder (202, keeping the last request), one that
// never answers, and a closed port.
let targets: SendTargets;
let receiver: Server;
let recorder: Server;
let silent: Server;
let closedPort: number;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the installed binary with only PATH (plus `env`) in its environment; stdin is closed unless fed. */
function run(args: string[], options: { env?: Record<string, string>; input?: string | Buffer; node?: string } = {}) {
  const [command, argv] = options.node ? [options.node, [bin, ...args]] : [bin, args];
  const child = spawn(command, argv, {
    cwd: project,
    env: { PATH: process.env.PATH ?? "", ...options.env },
    stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk;
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk;
  });
  if (options.input !== undefined) child.stdin?.end(options.input);
  return new Promise<Run>((done, fail) => {
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

const withSecret = { env: { FLAG_WEBHOOKS_SECRET: SECRET } };

function openssl(file: string, secret = SECRET): string {
  const out = execFileSync("openssl", ["dgst", "-sha256", "-hmac", secret, file], { encoding: "utf8" });
  return out.trim().split("= ").at(-1) ?? "";
}

/** A file in the consumer project; returns its absolute path. */
function file(name: string, content: string | Buffer): string {
  const path = join(project, name);
  writeFileSync(path, content);
  return path;
}

/** Not canonical JSON: indentation, "1.0", a raw "é", an escaped \u00e9, an emoji and a trailing newline. */
const PRETTY = `{\n  "id": "evt_pretty",\n  "type": "flag.updated",\n  "createdAt": "2026-11-23T10:00:00Z",\n  "environment": "production",\n  "data": {\n    "flag": "caf\u00e9-\\u00e9-\u{1F680}",\n    "changes": [{ "path": "rollout.percent", "from": 1.0, "to": 50 }],\n    "actor": { "type": "user", "email": "dana@example.com" }\n  }\n}\n`;

/** An error as the command must print it: one line, a hint for usage errors, no stack. */
function expectOneLineError(result: Run, code: 1 | 2, message: string | RegExp) {
  const lines = result.stderr.trimEnd().split("\n");
  expect(result.code).toBe(code);
  expect(lines[0]).toMatch(typeof message === "string" ? `flag-webhooks: ${message}` : message);
  expect(lines[0]?.startsWith("flag-webhooks: ")).toBe(true);
  expect(lines).toHaveLength(code === 2 ? 2 : 1);
  if (code === 2) expect(lines[1]).toMatch(/^Run "flag-webhooks( \w+)? --help" for usage\.$/);
  expect(result.stderr).not.toMatch(/^\s+at /m);
}

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), "flag-webhooks-cli-"));
  // The tarball npm publish ships (dist built by npm test before vitest), copied in for npm install.
  const packed = packedTarball();
  const tarball = basename(packed);
  copyFileSync(packed, join(project, tarball));
  writeFileSync(join(project, "package.json"), '{ "name": "consumer", "private": true }\n');
  // A real install, so that npm links package.json "bin" into node_modules/.bin. The package has
  // no dependencies (its peers are optional), so nothing is fetched.
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--no-package-lock", `./${tarball}`], {
    cwd: project,
    stdio: "pipe",
  });
  bin = join(project, "node_modules/.bin/flag-webhooks");

  targets = await startSendTargets(SECRET);
  ({ receiver, recorder, silent, closedPort } = targets);
}, 120_000);

afterAll(async () => {
  await targets?.close();
  if (project) rmSync(project, { recursive: true, force: true });
});

describe("flag-webhooks (the installed binary)", () => {
  it("is linked into node_modules/.bin by npm install", () => {
    expect(existsSync(bin)).toBe(true);
    expect(readFileSync(bin, "utf8").startsWith("#!/usr/bin/env node\n")).toBe(true);
  });

  it("ends quietly with 0 when its reader closes stdout first (`flag-webhooks --help | head`)", async () => {
    // The read end is closed before the child's node has even started, so its first write gets
    // EPIPE: without bin.ts's handler that is an uncaught error, a stack and exit code 1.
    const child = spawn(bin, ["--help"], {
      cwd: project,
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((done, fail) => {
      child.on("error", fail);
      child.on("close", done);
    });
    expect([code, stderr]).toEqual([0, ""]);
  });

  describe("help", () => {
    it("lists every command with its summary, and where the secret comes from", async () => {
      const result = await run(["--help"]);
      expect([result.code, result.stderr]).toEqual([0, ""]);
      for (const command of commands)
        expect(result.stdout).toMatch(new RegExp(`^  ${command.name} +${command.summary}$`, "m"));
      expect(result.stdout).toContain("FLAG_WEBHOOKS_SECRET");
      expect(result.stdout).toContain('Run "flag-webhooks <command> --help"');
      expect((await run([])).stdout).toBe(result.stdout);
      expect((await run(["help"])).stdout).toBe(result.stdout);
    });

    it.each(commands.map((c) => [c.name, c] as const))(
      "shows the %s help for --help, -h and help <command>, from its option table",
      async (name, command) => {
        const results = await Promise.all([run([name, "--help"]), run([name, "-h"]), run(["help", name])]);
        for (const result of results)
          expect([result.code, result.stderr, result.stdout]).toEqual([0, "", results[0]?.stdout]);
        const help = results[0]?.stdout ?? "";
        expect(help).toContain(`Usage:\n  ${command.usage}\n`);
        for (const [option, { short, description }] of Object.entries(command.options)) {
          expect(help).toMatch(new RegExp(`^  ${short ? `-${short}, ` : "    "}--${option}\\b`, "m"));
          expect(help.replace(/\n +/g, " ")).toContain(description);
        }
        expect(help).toMatch(/^ {2}-h, --help +Show this help/m);
      },
    );

    it("shows the help for --help even after another mistake on the line", async () => {
      const result = await run(["send", "--bogus", "--help"]);
      expect([result.code, result.stdout]).toEqual([0, (await run(["help", "send"])).stdout]);
    });

    it("prints the package's version", async () => {
      expect(await run(["--version"])).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
      expect((await run(["-v"])).stdout).toBe(`${version}\n`);
    });
  });

  describe("sign", () => {
    it("prints the same signature as openssl for a file's exact bytes", async () => {
      const path = file("pretty.json", PRETTY);
      const result = await run(["sign", path], withSecret);
      expect(result).toEqual({ code: 0, stdout: `${openssl(path)}\n`, stderr: "" });
    });

    it("reads stdin for - and when no file is given", async () => {
      const path = file("stdin.json", PRETTY);
      const expected = `${openssl(path)}\n`;
      expect((await run(["sign", "-"], { ...withSecret, input: PRETTY })).stdout).toBe(expected);
      expect((await run(["sign"], { ...withSecret, input: PRETTY })).stdout).toBe(expected);
    });

    it("signs an empty body when stdin is closed, and says so", async () => {
      const path = file("empty.json", "");
      const result = await run(["sign"], withSecret);
      expect([result.code, result.stdout]).toEqual([0, `${openssl(path)}\n`]);
      expect(result.stderr).toBe("Note: the body from stdin is empty.\n");
    });

    it("takes the secret from --secret too, which wins over the environment", async () => {
      const path = file("other.json", "{}");
      const result = await run(["sign", "--secret", "another-secret", path], withSecret);
      expect(result.stdout).toBe(`${openssl(path, "another-secret")}\n`);
    });
  });

  describe("verify", () => {
    it('prints "ok" and exits 0 for the right signature', async () => {
      const path = file("verify.json", PRETTY);
      expect(await run(["verify", "--signature", openssl(path), path], withSecret)).toEqual({
        code: 0,
        stdout: "ok\n",
        stderr: "",
      });
      expect((await run(["verify", "-s", openssl(path), "-"], { ...withSecret, input: PRETTY })).code).toBe(0);
    });

    it("exits 1 with one line when the body or the secret differs", async () => {
      const path = file("verify2.json", PRETTY);
      const signature = openssl(path);
      expectOneLineError(
        await run(["verify", "--signature", signature, "-"], { ...withSecret, input: `${PRETTY} ` }),
        1,
        "signature does not match: the body from stdin or the secret differs",
      );
      expectOneLineError(
        await run(["verify", "--signature", signature, "--secret", "wrong-secret", path]),
        1,
        `signature does not match: the body from ${path} or the secret differs`,
      );
    });

    it.each([
      ["uppercase hex", (s: string) => s.toUpperCase(), "signature has uppercase letters"],
      ["a sha256= prefix", (s: string) => `sha256=${s}`, 'signature has a "sha256=" prefix'],
      ["a truncated digest", (s: string) => s.slice(0, 63), "signature must be 64 lowercase hex characters, got 63"],
    ])("explains why a signature with %s can never verify", async (_, change, message) => {
      const path = file("verify3.json", PRETTY);
      expectOneLineError(await run(["verify", "-s", change(openssl(path)), path], withSecret), 1, message);
    });

    it("needs --signature", async () => {
      expectOneLineError(await run(["verify", "x.json"], withSecret), 2, "missing --signature <hex>");
    });
  });

  describe("send", () => {
    it("sends a fresh signed flag.updated event and prints the receiver's answer", async () => {
      const url = urlOf(receiver);
      const result = await run(["send", url], withSecret);
      const [sent, answered, body] = result.stdout.split("\n");
      const id = /^--> flag\.updated \[(evt_[0-9a-f]{32})\] \d+ bytes, signed$/.exec(sent ?? "")?.[1];
      expect(id, result.stdout).toBeDefined();
      expect(answered).toBe(`<-- [200 OK] POST ${url}`);
      expect(JSON.parse(body ?? "")).toEqual({
        received: id,
        summary: "dana@example.com changed new-checkout in production (on: false → true)",
      });
      expect([result.code, result.stderr]).toEqual([0, ""]);
    });

    it("sends the event type asked for", async () => {
      const result = await run(["send", urlOf(receiver), "--type", "rollout.step"], withSecret);
      expect(result.stdout).toMatch(/^--> rollout\.step \[evt_/);
      expect(result.stdout).toContain('"summary":"rollout.step in production"');
      expect(result.code).toBe(0);
    });

    it("sends a file's exact bytes, signed as openssl signs them, with the service's headers", async () => {
      const path = file("event.json", PRETTY);
      const result = await run(["send", urlOf(recorder, "/hook?x=1"), "--file", path], withSecret);
      expect(result).toEqual({
        code: 0,
        stdout: `--> ${path}: ${Buffer.byteLength(PRETTY)} bytes, signed\n<-- [202 Accepted] POST ${urlOf(recorder, "/hook?x=1")}\nrecorded\n`,
        stderr: "",
      });
      expect(targets.recorded?.body.toString("utf8")).toBe(PRETTY);
      expect(targets.recorded?.headers).toMatchObject({
        "service-signature": openssl(path),
        "content-type": "application/json",
        "user-agent": `flag-webhooks/${version}`,
      });
    });

    it("sends a non-canonical file that the Express receiver accepts: no byte was re-serialised", async () => {
      const result = await run(["send", urlOf(receiver), "-f", file("event2.json", PRETTY)], withSecret);
      expect(result.stdout).toContain('"received":"evt_pretty"');
      expect(result.code).toBe(0);
    });

    it("sends stdin's bytes for --file -", async () => {
      const result = await run(["send", urlOf(recorder), "--file", "-"], { ...withSecret, input: PRETTY });
      expect(result.code).toBe(0);
      expect(targets.recorded?.body.toString("utf8")).toBe(PRETTY);
    });

    it("--tamper changes one byte after signing: the receiver answers 401 and the command exits 1", async () => {
      const result = await run(["send", urlOf(receiver), "--tamper"], withSecret);
      const [sent, answered, body] = result.stdout.split("\n");
      expect(sent).toMatch(
        /^--> flag\.updated \[evt_\w+\] \d+ bytes, signed, then byte \d+ changed from "\d" to "\d"$/,
      );
      expect(answered).toBe(`<-- [401 Unauthorized] POST ${urlOf(receiver)}`);
      expect(JSON.parse(body ?? "").error.code).toBe("invalid_signature");
      expect([result.code, result.stderr]).toEqual([1, ""]);
    });

    it("--tamper keeps the body valid JSON of the same length, so only the signature refuses it", async () => {
      const path = file("tamper.json", PRETTY);
      await run(["send", urlOf(recorder), "-f", path, "--tamper"], withSecret);
      const body = targets.recorded?.body ?? Buffer.alloc(0);
      expect(body.length).toBe(Buffer.byteLength(PRETTY));
      expect([...body].filter((byte, i) => byte !== Buffer.from(PRETTY)[i])).toHaveLength(1);
      expect(() => JSON.parse(body.toString("utf8"))).not.toThrow();
      expect(targets.recorded?.headers["service-signature"]).toBe(openssl(path));
    });

    it("exits 1, in one line, when nothing listens on the port", async () => {
      const url = `http://127.0.0.1:${closedPort}/webhooks`;
      expectOneLineError(
        await run(["send", url], withSecret),
        1,
        `could not reach ${url}: connection refused (is your receiver running on port ${closedPort}?)`,
      );
    });

    it("prints where a redirect points, and does not follow it", async () => {
      const redirecting = await listen(
        createServer((req, res) => {
          req.resume();
          res.writeHead(308, { location: "/v2/webhooks", "content-type": "text/plain" }).end("moved");
        }),
      );
      try {
        const url = urlOf(redirecting);
        const result = await run(["send", url], withSecret);
        const lines = result.stdout.split("\n");
        expect(lines[1]).toBe(`<-- [308 Permanent Redirect] POST ${url}`);
        expect(lines[2]).toBe(
          `<-- Location: ${urlOf(redirecting, "/v2/webhooks")} (not followed: the service posts only to the registered URL)`,
        );
        expect(lines[3]).toBe("moved");
        expect(result.code).toBe(1);
      } finally {
        await close(redirecting);
      }
    });

    it("gives up after --timeout when the receiver never answers", async () => {
      const url = urlOf(silent);
      expectOneLineError(
        await run(["send", url, "--timeout", "0.3"], withSecret),
        1,
        `no answer from ${url} within 0.3 s`,
      );
    });

    it.each([
      [["send"], "missing <url>, e.g. http://localhost:3000/webhooks"],
      [["send", "localhost:3000"], 'invalid URL "localhost:3000": only http:// and https:// are supported'],
      [["send", "not a url"], 'invalid URL "not a url", expected e.g. http://localhost:3000/webhooks'],
      [["send", "http://127.0.0.1/", "--type", "flag.archived"], 'unknown event type "flag.archived"; use one of'],
      [
        ["send", "http://127.0.0.1/", "--type", "rollout.step", "-f", "x.json"],
        "--type and --file cannot be used together",
      ],
      [
        ["send", "http://127.0.0.1/", "--timeout", "soon"],
        '--timeout must be a positive number of seconds, got "soon"',
      ],
      [["send", "http://127.0.0.1/", "--type"], "option --type needs a value: --type <type>"],
      [["send", "http://127.0.0.1/", "--tamper=yes"], "option --tamper takes no value"],
    ])("exits 2 for a usage mistake: %j", async (args, message) => {
      expectOneLineError(await run(args, withSecret), 2, message);
    });
  });

  describe("errors", () => {
    it("exits 2 when there is no secret, and names both ways to give one", async () => {
      for (const args of [
        ["send", urlOf(receiver)],
        ["sign", "-"],
        ["verify", "-s", "0".repeat(64)],
      ]) {
        const result = await run(args, { input: "{}" });
        expectOneLineError(result, 2, "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET");
        expect(result.stdout).toBe("");
      }
      expectOneLineError(await run(["sign", "--secret", ""], { input: "{}" }), 2, "the secret is empty");
    });

    it("exits 2 for an unknown command, and suggests the one meant", async () => {
      expectOneLineError(await run(["snd"]), 2, 'unknown command "snd" (did you mean "send"?)');
      expectOneLineError(await run(["deploy"]), 2, 'unknown command "deploy"');
      expectOneLineError(await run(["help", "deploy"]), 2, 'unknown command "deploy"');
    });

    it("exits 2 for an unknown option, before or after the command", async () => {
      expectOneLineError(await run(["sign", "--bogus"], withSecret), 2, "unknown option: --bogus");
      expectOneLineError(await run(["sign", "-x"], withSecret), 2, "unknown option: -x");
      expectOneLineError(await run(["--bogus"]), 2, "unknown option: --bogus (options go after the command)");
    });

    it("exits 1 for a file it cannot read", async () => {
      mkdirSync(join(project, "a-directory"), { recursive: true });
      expectOneLineError(await run(["sign", "missing.json"], withSecret), 1, "cannot read missing.json: no such file");
      expectOneLineError(
        await run(["sign", "a-directory"], withSecret),
        1,
        "cannot read a-directory: it is a directory",
      );
      expectOneLineError(
        await run(["send", urlOf(receiver), "--file", "missing.json"], withSecret),
        1,
        "cannot read missing.json: no such file",
      );
    });

    it("never prints the secret, from the environment or from --secret, in output or errors", async () => {
      const path = file("secret.json", "{}");
      const runs = await Promise.all([
        run(["--help"], withSecret),
        run(["send", "--help"], withSecret),
        run(["sign", path], withSecret),
        run(["verify", "-s", "0".repeat(64), path], withSecret),
        run(["send", urlOf(receiver)], withSecret),
        run(["send", urlOf(receiver), "--tamper", `--secret=${SECRET}`]),
        run(["send", `http://127.0.0.1:${closedPort}/`, "--secret", SECRET]),
        run(["sign", "--bogus", `--secret=${SECRET}`, path]),
        run([`--secret=${SECRET}`, "sign", path]),
        run(["sign", `--bogus=${SECRET}`, path], withSecret),
        run([SECRET], withSecret), // the secret typed where the command goes
        run(["send", SECRET], withSecret),
        run(["sign", SECRET], withSecret),
      ]);
      for (const result of runs) {
        expect(result.stdout + result.stderr).not.toContain(SECRET);
        expect(result.stdout + result.stderr).not.toMatch(/^\s+at /m);
      }
      expect(runs.at(-3)?.stderr).toContain('unknown command "***"');
    });

    it("refuses a secret too short to be one, without spelling it out in the message", async () => {
      const path = file("short.json", '{"type":"flag.updated"}');
      for (const secret of ["e", "t", "1234567"]) {
        const runs = await Promise.all([
          run(["sign", path], { env: { FLAG_WEBHOOKS_SECRET: secret } }),
          run(["sign", path, "--secret", secret]),
          run(["verify", "-s", "0".repeat(64), path], { env: { FLAG_WEBHOOKS_SECRET: secret } }),
          run(["send", "http://127.0.0.1:9/webhooks"], { env: { FLAG_WEBHOOKS_SECRET: secret } }),
        ]);
        for (const result of runs) {
          expectOneLineError(
            result,
            2,
            "the secret is too short to be an endpoint secret (fewer than 8 characters; the service's are whsec_ and 48 hex digits)",
          );
          expect(result.stdout).toBe("");
          expect(result.stderr).not.toContain("***");
        }
        // Another mistake's message is printed as it is: "***" for each "e" would spell the secret out.
        const other = await run(["sned"], { env: { FLAG_WEBHOOKS_SECRET: secret } });
        expectOneLineError(other, 2, 'unknown command "sned" (did you mean "send"?)');
      }
      // The shortest accepted secret is still hidden wherever it appears.
      const eight = await run(["abcdefgh"], { env: { FLAG_WEBHOOKS_SECRET: "abcdefgh" } });
      expectOneLineError(eight, 2, 'unknown command "***"');
    });
  });

  describe.each([
    ["node 22", join(extraNodes, "node22/bin/node")],
    ["node 24", join(extraNodes, "node24/bin/node")],
  ])("on %s", (_, node) => {
    it("signs as openssl does and words option errors the same way", async () => {
      expect(existsSync(node), `${node} is missing: run npm install --prefix tools/node-versions`).toBe(true);
      const path = file("versions.json", PRETTY);
      expect((await run(["sign", path], { ...withSecret, node })).stdout).toBe(`${openssl(path)}\n`);
      expectOneLineError(await run(["sign", "--bogus"], { ...withSecret, node }), 2, "unknown option: --bogus");
      expectOneLineError(
        await run(["send", "http://127.0.0.1/", "--type"], { ...withSecret, node }),
        2,
        "option --type needs a value: --type <type>",
      );
    });
  });
});
