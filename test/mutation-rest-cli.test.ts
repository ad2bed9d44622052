import { createHmac } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, STATUS_CODES } from "node:http";
import type { AddressInfo } from "node:net";
import { createServer as createNetServer, type Server as NetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../examples/express.js";
import type { Command } from "../src/cli/command.js";
import { commands } from "../src/cli/commands.js";
import { main } from "../src/cli/main.js";
import { close, listen } from "./support/http.js";

// The `flag-webhooks` command run in-process: main() with the process's environment and streams
// replaced by real Node streams, the way bin.ts calls it. test/cli.test.ts runs the installed
// binary; this file checks the same behaviour from src/, so that mutation testing sees it.
const SECRET = "cli-test-secret-7f3a9c";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function sink(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

async function run(
  args: string[],
  options: { env?: Record<string, string>; input?: string | Buffer | Readable; commands?: Command[] } = {},
): Promise<Run> {
  const stdout = sink();
  const stderr = sink();
  const input = options.input;
  const stdin = input instanceof Readable ? input : Readable.from(input === undefined ? [] : [Buffer.from(input)]);
  const code = await main(
    args,
    { env: { ...options.env }, stdin, stdout: stdout.stream, stderr: stderr.stream },
    options.commands,
  );
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

const withSecret = { env: { FLAG_WEBHOOKS_SECRET: SECRET } };
const hmac = (body: string | Buffer, secret = SECRET) => createHmac("sha256", secret).update(body).digest("hex");

function expectOneLineError(result: Run, code: 1 | 2, message: string, command?: string) {
  expect(result.code).toBe(code);
  const lines = result.stderr.trimEnd().split("\n");
  expect(lines[0]).toBe(`flag-webhooks: ${message}`);
  if (code === 2) {
    expect(lines).toEqual([
      `flag-webhooks: ${message}`,
      `Run "flag-webhooks${command ? ` ${command}` : ""} --help" for usage.`,
    ]);
  } else expect(lines).toHaveLength(1);
  expect(result.stderr.endsWith("\n")).toBe(true);
}

let dir: string;
let receiver: Server;
let recorder: Server;
let silent: Server;
let closedPort: number;
let recorded: { body: Buffer; headers: IncomingMessage["headers"] } | undefined;
let answer: { status: number; body: string; headers?: Record<string, string>; reason?: string } = {
  status: 202,
  body: "recorded",
};

const urlOf = (server: Server | NetServer, path = "/webhooks") =>
  `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "flag-webhooks-cli-src-"));
  receiver = await listen(createApp(SECRET).listen(0, "127.0.0.1"));
  recorder = await listen(
    createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        recorded = { body: Buffer.concat(chunks), headers: req.headers };
        res
          .writeHead(answer.status, answer.reason ?? (STATUS_CODES[answer.status] as string), {
            "content-type": "text/plain",
            ...answer.headers,
          })
          .end(answer.body);
      });
    }),
  );
  silent = await listen(createServer(() => undefined));
  const closed = await listen(createServer());
  closedPort = (closed.address() as AddressInfo).port;
  await close(closed);
});

afterAll(async () => {
  await Promise.all([close(receiver), close(recorder), close(silent)]);
  rmSync(dir, { recursive: true, force: true });
});

describe("help and version", () => {
  it("prints the top help for nothing, --help, -h and help, listing every command", async () => {
    const top = await run(["--help"]);
    expect([top.code, top.stderr]).toEqual([0, ""]);
    for (const command of commands)
      expect(top.stdout).toMatch(new RegExp(`^  ${command.name} +${command.summary}`, "m"));
    expect(top.stdout).toMatch(/^ {2}help +Show the help of a command$/m);
    expect(top.stdout).toMatch(/^ {2}-h, --help +Show this help$/m);
    expect(top.stdout).toMatch(/^ {2}-v, --version +Print the version$/m);
    expect(top.stdout).toContain("FLAG_WEBHOOKS_SECRET environment");
    expect(top.stdout.startsWith("Send, sign and verify webhook deliveries")).toBe(true);
    expect(top.stdout.endsWith('Run "flag-webhooks <command> --help" for the options of a command.\n')).toBe(true);
    for (const args of [[], ["-h"], ["help"]]) expect(await run(args)).toEqual(top);
  });

  it("prints the whole top help, as a user reads it", async () => {
    // The help is what the user reads: every line of it is checked, the command rows from the table.
    const rows = [
      "  send     Send a signed test delivery to your receiver",
      "  sign     Print the Service-Signature of a body",
      "  verify   Check a body against a Service-Signature",
      "  dev      Run the feature-flag service locally, with a page to watch deliveries",
      "  help     Show the help of a command",
    ];
    expect((await run([])).stdout).toBe(
      [
        "Send, sign and verify webhook deliveries of the feature-flag service, or run the whole service",
        "on your machine, to test a receiver while you build it. Deliveries are signed as the service",
        "signs them (Service-Signature: the lowercase hex HMAC-SHA256 of the body, keyed with the",
        "endpoint secret).",
        "",
        "Usage:",
        "  flag-webhooks <command> [options]",
        "",
        "Commands:",
        ...rows,
        "",
        "Options:",
        "  -h, --help      Show this help",
        "  -v, --version   Print the version",
        "",
        "The secret comes from --secret <secret> or, better, the FLAG_WEBHOOKS_SECRET environment",
        "variable (a --secret value stays in your shell history). It is never printed.",
        "",
        "Exit status: 0 on success; 1 when the work failed (the receiver did not answer 2xx, a signature",
        "did not match, a file or URL could not be reached); 2 when the command was used wrongly.",
        "",
        "Examples:",
        "  $ export FLAG_WEBHOOKS_SECRET=...   # your endpoint secret",
        "  $ flag-webhooks send http://localhost:3000/webhooks",
        "  $ flag-webhooks send http://localhost:3000/webhooks --tamper",
        "  $ flag-webhooks sign event.json",
        "",
        'Run "flag-webhooks <command> --help" for the options of a command.',
        "",
      ].join("\n"),
    );
  });

  it("wraps a description at exactly 100 columns, and never leaves an option alone on its line", async () => {
    // Left column "-h, --help" is 10 wide, so descriptions start at column 14 (plus the space).
    const fits = `${"b".repeat(83)}`; // "  <left>  " (14) + " a" (2) + " " + 83 = 100: still fits
    const wide: Command = {
      name: "wide",
      summary: "x",
      usage: "flag-webhooks wide",
      options: {
        a: { type: "boolean", description: `a ${fits} c` },
        b: { type: "boolean", description: `${"w".repeat(95)} d` },
      },
      run: async () => 0,
    };
    const lines = (await run(["help", "wide"], { commands: [wide] })).stdout.split("\n");
    const a = lines.indexOf(`      --a      a ${fits}`);
    expect(a, lines.join("\n")).toBeGreaterThan(0);
    expect(lines[a]).toHaveLength(100);
    expect(lines[a + 1]).toBe(`${" ".repeat(15)}c`);
    // A first word longer than the line stays beside its option rather than leave it alone.
    expect(lines[a + 2]).toBe(`      --b      ${"w".repeat(95)}`);
    expect(lines[a + 3]).toBe(`${" ".repeat(15)}d`);
  });

  it("prints the version from source as 0.0.0-dev", async () => {
    expect(await run(["--version"])).toEqual({ code: 0, stdout: "0.0.0-dev\n", stderr: "" });
    expect(await run(["-v"])).toEqual({ code: 0, stdout: "0.0.0-dev\n", stderr: "" });
  });

  it("prints a command's help from its option table, for --help, -h and help <command>", async () => {
    const help = await run(["help", "send"]);
    expect([help.code, help.stderr]).toEqual([0, ""]);
    expect(help.stdout.startsWith("Posts one delivery, signed with the secret")).toBe(true);
    expect(help.stdout).toContain("\n\nUsage:\n  flag-webhooks send <url> [options]\n\nOptions:\n");
    expect(help.stdout).toContain(
      "  -t, --type <type>         The event type to generate: flag.updated, flag.created, flag.deleted,\n" +
        "                            rollout.step, rollout.guard_triggered (default: flag.updated)\n",
    );
    expect(help.stdout).toMatch(/^ {6}--tamper +Change one byte after signing/m);
    expect(help.stdout).not.toContain("--tamper <");
    expect(help.stdout).toMatch(/^ {6}--timeout <seconds> +How long to wait for the answer \(default: 10\)$/m);
    expect(help.stdout).toMatch(/^ {6}--secret <secret> +The endpoint secret \(default: \$FLAG_WEBHOOKS_SECRET\)$/m);
    expect(help.stdout).toMatch(/^ {2}-h, --help +Show this help for send$/m);
    expect(help.stdout).toContain("\n\nExamples:\n  $ flag-webhooks send http://localhost:3000/webhooks\n");
    expect(help.stdout.endsWith("# expect 401 invalid_signature\n")).toBe(true);
    expect(await run(["send", "--help"])).toEqual(help);
    expect(await run(["send", "-h"])).toEqual(help);
    // --help wins over another mistake on the line, but not after "--".
    expect(await run(["send", "--bogus", "--help"])).toEqual(help);
    expectOneLineError(
      await run(["send", "--", "--help"], withSecret),
      2,
      'invalid URL "--help", expected e.g. http://localhost:3000/webhooks',
      "send",
    );
  });

  it("wraps long option descriptions at 100 columns, under their own column", async () => {
    const help = (await run(["help", "dev"])).stdout;
    const lines = help.split("\n");
    const options = lines.slice(lines.indexOf("Options:") + 1, lines.indexOf("Examples:") - 1);
    expect(options.length).toBeGreaterThan(7);
    for (const line of options) expect(line.length).toBeLessThanOrEqual(100);
    const state = lines.findIndex((line) => line.startsWith("      --state <file>"));
    expect(lines[state]?.length).toBeLessThanOrEqual(100);
    const column = lines[state]?.indexOf("Keep flags") ?? -1;
    expect(column).toBeGreaterThan(20);
    // The continuation lines start in the description's column.
    expect(lines[state + 1]?.slice(0, column).trim()).toBe("");
    expect(lines[state + 1]?.[column]).toMatch(/\S/);
    expect(help.replace(/\n +/g, " ")).toContain(
      "Keep flags, webhooks, the token and the last 1000 deliveries in this file (mode 0600) across restarts; a restart reuses the --forward webhook and its secret",
    );
  });

  it("builds a help from the command table: a summary stands in for the description, no examples section when none", async () => {
    const quiet: Command = {
      name: "quiet",
      summary: "Do nothing",
      usage: "flag-webhooks quiet",
      options: {
        level: { type: "string", description: "How quiet" },
        loud: { type: "boolean", default: false, description: "Not quiet" },
      },
      run: async () => 0,
    };
    const help = await run(["help", "quiet"], { commands: [quiet] });
    expect(help.stdout).toBe(
      [
        "Do nothing.",
        "",
        "Usage:",
        "  flag-webhooks quiet",
        "",
        "Options:",
        "      --level <value>   How quiet",
        "      --loud            Not quiet",
        "  -h, --help            Show this help for quiet",
        "",
      ].join("\n"),
    );
  });
});

describe("usage mistakes", () => {
  it("refuses an unknown command, suggesting the one meant", async () => {
    expectOneLineError(await run(["snd"]), 2, 'unknown command "snd" (did you mean "send"?)');
    expectOneLineError(await run(["veriffy"]), 2, 'unknown command "veriffy" (did you mean "verify"?)');
    expectOneLineError(await run(["sig"]), 2, 'unknown command "sig" (did you mean "sign"?)');
    expectOneLineError(await run(["deploy"]), 2, 'unknown command "deploy"');
    expectOneLineError(await run(["help", "deploy"]), 2, 'unknown command "deploy"');
    expectOneLineError(await run(["sendxyz"]), 2, 'unknown command "sendxyz"');
  });

  it("refuses options, named without their value, before the command", async () => {
    expectOneLineError(await run(["--bogus=1"]), 2, "unknown option: --bogus (options go after the command)");
    expectOneLineError(await run(["-x"]), 2, "unknown option: -x (options go after the command)");
  });

  it("rewords node's option errors in one line naming the option", async () => {
    expectOneLineError(await run(["sign", "--bogus"], withSecret), 2, "unknown option: --bogus", "sign");
    expectOneLineError(await run(["sign", "--bogus=x"], withSecret), 2, "unknown option: --bogus", "sign");
    expectOneLineError(await run(["sign", "-x"], withSecret), 2, "unknown option: -x", "sign");
    expectOneLineError(
      await run(["send", "http://127.0.0.1/", "--type"], withSecret),
      2,
      'option --type needs a value: --type <type> (for a value that starts with "-", write --type=<type>)',
      "send",
    );
    expectOneLineError(
      await run(["verify", "--signature"], withSecret),
      2,
      'option --signature needs a value: --signature <hex> (for a value that starts with "-", write --signature=<hex>)',
      "verify",
    );
    expectOneLineError(
      await run(["send", "http://127.0.0.1/", "--tamper=yes"], withSecret),
      2,
      "option --tamper takes no value",
      "send",
    );
  });

  it("names the option whose value is missing with a generic placeholder when it has none", async () => {
    const plain: Command = {
      name: "plain",
      summary: "x",
      usage: "flag-webhooks plain",
      options: { level: { type: "string", description: "y" } },
      run: async () => 0,
    };
    expectOneLineError(
      await run(["plain", "--level"], { commands: [plain] }),
      2,
      'option --level needs a value: --level <value> (for a value that starts with "-", write --level=<value>)',
      "plain",
    );
  });

  it("passes options and positionals to the command, short options and defaults included", async () => {
    let seen: unknown;
    const echo: Command = {
      name: "echo",
      summary: "x",
      usage: "flag-webhooks echo",
      options: {
        level: { type: "string", short: "l", description: "y", default: "3" },
        loud: { type: "boolean", description: "z" },
        plain: { type: "string", description: "w" },
      },
      run: async ({ values, positionals, stdout }) => {
        seen = { values: { ...values }, positionals };
        stdout.write("done\n");
        return 7;
      },
    };
    expect(await run(["echo", "a", "-l", "5", "--loud", "b"], { commands: [echo] })).toEqual({
      code: 7,
      stdout: "done\n",
      stderr: "",
    });
    expect(seen).toStrictEqual({ values: { level: "5", loud: true }, positionals: ["a", "b"] });
    await run(["echo"], { commands: [echo] });
    // Only the options given or defaulted are set: no key for the others.
    expect(seen).toStrictEqual({ values: { level: "3" }, positionals: [] });
  });

  it("reports a command's unexpected failure in one line with exit 1, the secret hidden", async () => {
    const broken: Command = {
      name: "broken",
      summary: "x",
      usage: "flag-webhooks broken",
      options: {},
      run: async () => {
        throw new Error(`database down near ${SECRET}`);
      },
    };
    const thrower: Command = { ...broken, name: "thrower", run: () => Promise.reject("plain text") };
    expectOneLineError(
      await run(["broken"], { ...withSecret, commands: [broken] }),
      1,
      "unexpected error: database down near ***",
    );
    expectOneLineError(await run(["thrower"], { commands: [thrower] }), 1, "unexpected error: plain text");
  });

  it("never prints the secret given by the environment, --secret or --secret=", async () => {
    expectOneLineError(await run([SECRET], withSecret), 2, 'unknown command "***"');
    expectOneLineError(
      await run(["sign", "--secret", SECRET, "--", `${dir}/${SECRET}`]),
      1,
      `cannot read ${dir}/***: no such file`,
    );
    expectOneLineError(
      await run(["sign", `--secret=${SECRET}`, `${dir}/${SECRET}`]),
      1,
      `cannot read ${dir}/***: no such file`,
    );
    expectOneLineError(
      await run([`--secret=${SECRET}`, "sign"]),
      2,
      "unknown option: --secret (options go after the command)",
    );
    expectOneLineError(
      await run(["send", `x${SECRET}x`], withSecret),
      2,
      'invalid URL "x***x", expected e.g. http://localhost:3000/webhooks',
      "send",
    );
    // The shortest secret is still hidden; a too short one is refused and not replaced.
    expectOneLineError(
      await run(["abcdefgh"], { env: { FLAG_WEBHOOKS_SECRET: "abcdefgh" } }),
      2,
      'unknown command "***"',
    );
    expectOneLineError(
      await run(["sned"], { env: { FLAG_WEBHOOKS_SECRET: "e" } }),
      2,
      'unknown command "sned" (did you mean "send"?)',
    );
    expectOneLineError(await run(["sned", "--secret", ""], {}), 2, 'unknown command "sned" (did you mean "send"?)');
  });

  it("needs a secret, of at least 8 characters, from --secret or the environment", async () => {
    const path = file("short.json", "{}");
    expectOneLineError(
      await run(["sign", path]),
      2,
      "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET",
      "sign",
    );
    expectOneLineError(
      await run(["sign", path], { env: { FLAG_WEBHOOKS_SECRET: "" } }),
      2,
      "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET",
      "sign",
    );
    expectOneLineError(await run(["sign", "--secret", "", path]), 2, "the secret is empty", "sign");
    const short =
      "the secret is too short to be an endpoint secret (fewer than 8 characters; the service's are whsec_ and 48 hex digits)";
    expectOneLineError(await run(["sign", path], { env: { FLAG_WEBHOOKS_SECRET: "1234567" } }), 2, short, "sign");
    expectOneLineError(await run(["sign", "--secret", "e", path]), 2, short, "sign");
    expect((await run(["sign", path], { env: { FLAG_WEBHOOKS_SECRET: "12345678" } })).stdout).toBe(
      `${hmac("{}", "12345678")}\n`,
    );
  });
});

describe("sign", () => {
  it("prints the HMAC of a file's exact bytes; --secret wins over the environment", async () => {
    const body = '{ "a": "caf\u00e9" }\n';
    const path = file("sign.json", body);
    expect(await run(["sign", path], withSecret)).toEqual({ code: 0, stdout: `${hmac(body)}\n`, stderr: "" });
    expect((await run(["sign", "--secret", "another-secret", path], withSecret)).stdout).toBe(
      `${hmac(body, "another-secret")}\n`,
    );
  });

  it("reads stdin for - or no file, in bytes or text chunks, and notes an empty body", async () => {
    expect((await run(["sign", "-"], { ...withSecret, input: "abc" })).stdout).toBe(`${hmac("abc")}\n`);
    expect((await run(["sign"], { ...withSecret, input: Readable.from(["ab", "c"]) })).stdout).toBe(`${hmac("abc")}\n`);
    expect(await run(["sign"], withSecret)).toEqual({
      code: 0,
      stdout: `${hmac("")}\n`,
      stderr: "Note: the body from stdin is empty.\n",
    });
    expect((await run(["sign", file("empty.json", "")], withSecret)).stderr).toBe(
      `Note: the body from ${dir}/empty.json is empty.\n`,
    );
  });

  it("tells a terminal user how to end stdin", async () => {
    const tty = Object.assign(Readable.from([Buffer.from("abc")]), { isTTY: true });
    expect(await run(["sign"], { ...withSecret, input: tty })).toEqual({
      code: 0,
      stdout: `${hmac("abc")}\n`,
      stderr: "Reading the body from stdin; end it with Ctrl-D.\n",
    });
  });

  it("says why a file or stdin cannot be read", async () => {
    mkdirSync(join(dir, "a-directory"), { recursive: true });
    const plain = file("plain.txt", "x");
    expectOneLineError(
      await run(["sign", join(dir, "missing.json")], withSecret),
      1,
      `cannot read ${dir}/missing.json: no such file`,
    );
    expectOneLineError(
      await run(["sign", join(dir, "a-directory")], withSecret),
      1,
      `cannot read ${dir}/a-directory: it is a directory`,
    );
    expectOneLineError(
      await run(["sign", `${plain}/x`], withSecret),
      1,
      `cannot read ${plain}/x: a part of the path is not a directory`,
    );
    const long = join(dir, "n".repeat(300));
    expectOneLineError(await run(["sign", long], withSecret), 1, `cannot read ${long}: the name is too long`);
    // A reason without a code of its own is node's message.
    const nul = await run(["sign", "a\0b"], withSecret);
    expect(nul.code).toBe(1);
    expect(nul.stderr).toMatch(
      /^flag-webhooks: cannot read a\0b: The argument 'path' must be a string.*without null bytes/,
    );
    const failing = new Readable({
      read() {
        this.destroy(new Error("stream broke"));
      },
    });
    expectOneLineError(await run(["sign"], { ...withSecret, input: failing }), 1, "cannot read stdin: stream broke");
  });

  it("takes at most one file", async () => {
    expectOneLineError(await run(["sign", "a", "b"], withSecret), 2, "expected at most one file, got 2", "sign");
  });
});

describe("verify", () => {
  const body = '{"id":"evt_1"}';

  it('prints "ok" for the right signature, from a file or stdin', async () => {
    const path = file("verify.json", body);
    expect(await run(["verify", "--signature", hmac(body), path], withSecret)).toEqual({
      code: 0,
      stdout: "ok\n",
      stderr: "",
    });
    expect(await run(["verify", "-s", hmac(body)], { ...withSecret, input: body })).toEqual({
      code: 0,
      stdout: "ok\n",
      stderr: "",
    });
  });

  it("exits 1 in one line when the body or the secret differs", async () => {
    const path = file("verify2.json", body);
    expectOneLineError(
      await run(["verify", "-s", hmac(body), "-"], { ...withSecret, input: `${body} ` }),
      1,
      "signature does not match: the body from stdin or the secret differs",
    );
    expectOneLineError(
      await run(["verify", "-s", hmac(body), "--secret", "wrong-secret", path]),
      1,
      `signature does not match: the body from ${path} or the secret differs`,
    );
  });

  it("explains why a malformed signature can never verify, before reading the body", async () => {
    const s = hmac(body);
    const input = new Readable({
      read() {
        throw new Error("the body must not be read");
      },
    });
    const cases: [string, string][] = [
      [
        s.toUpperCase(),
        "signature has uppercase letters: the service sends lowercase hex and receivers compare exactly",
      ],
      [`sha256=${s}`, 'signature has a "sha256=" prefix: the service sends the bare hex digest'],
      [`SHA256=${s}`, 'signature has a "sha256=" prefix: the service sends the bare hex digest'],
      [s.slice(0, 63), "signature must be 64 lowercase hex characters, got 63 characters"],
      [`${s}0`, "signature must be 64 lowercase hex characters, got 65 characters"],
      [`x${s}`, "signature must be 64 lowercase hex characters, got 65 characters"],
      [`x-sha256=${s}`, "signature must be 64 lowercase hex characters, got 73 characters"],
      [`${s.slice(0, 63)}g`, "signature must be 64 lowercase hex characters, got 64 characters"],
      [
        `${s.slice(0, 63)}A`.replace(/[a-f]/g, "A"),
        "signature has uppercase letters: the service sends lowercase hex and receivers compare exactly",
      ],
    ];
    for (const [signature, message] of cases) {
      expectOneLineError(await run(["verify", "-s", signature], { ...withSecret, input }), 1, message);
    }
  });

  it("needs --signature and at most one file, and a secret", async () => {
    expectOneLineError(await run(["verify", "x.json"], withSecret), 2, "missing --signature <hex>", "verify");
    expectOneLineError(
      await run(["verify", "-s", hmac(body), "a", "b"], withSecret),
      2,
      "expected at most one file, got 2",
      "verify",
    );
    expectOneLineError(
      await run(["verify", "-s", hmac(body)]),
      2,
      "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET",
      "verify",
    );
  });
});

describe("send", () => {
  it("sends a fresh signed flag.updated event that the Express example accepts", async () => {
    const url = urlOf(receiver);
    const result = await run(["send", url], withSecret);
    const [sent, answered, reply, rest] = result.stdout.split("\n");
    const match = /^--> flag\.updated \[(evt_[0-9a-f]{32})\] (\d+) bytes, signed$/.exec(sent ?? "");
    expect(match, result.stdout).not.toBeNull();
    expect(answered).toBe(`<-- [200 OK] POST ${url}`);
    expect(JSON.parse(reply ?? "").received).toBe(match?.[1]);
    expect(rest).toBe("");
    expect([result.code, result.stderr]).toEqual([0, ""]);
  });

  it.each(["flag.updated", "flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"])(
    "sends a signed %s event with the service's headers",
    async (type) => {
      answer = { status: 202, body: "recorded" };
      const url = urlOf(recorder, "/hook?x=1");
      const result = await run(["send", url, "-t", type], withSecret);
      expect(result.code).toBe(0);
      const event = JSON.parse(recorded?.body.toString("utf8") ?? "");
      expect(event.type).toBe(type);
      expect(result.stdout).toBe(
        `--> ${type} [${event.id}] ${recorded?.body.length} bytes, signed\n<-- [202 Accepted] POST ${url}\nrecorded\n`,
      );
      expect(recorded?.headers).toMatchObject({
        "service-signature": hmac(recorded?.body ?? ""),
        "content-type": "application/json",
        "user-agent": "flag-webhooks/0.0.0-dev",
      });
    },
  );

  it("sends a file's or stdin's exact bytes", async () => {
    answer = { status: 200, body: "fine\n" };
    const body = '{\n  "id": "evt_pretty", "n": 1.0\n}\n';
    const path = file("event.json", body);
    const url = urlOf(recorder);
    expect(await run(["send", url, "--file", path], withSecret)).toEqual({
      code: 0,
      stdout: `--> ${path}: ${Buffer.byteLength(body)} bytes, signed\n<-- [200 OK] POST ${url}\nfine\n`,
      stderr: "",
    });
    expect(recorded?.body.toString("utf8")).toBe(body);
    expect(recorded?.headers["service-signature"]).toBe(hmac(body));
    const fromStdin = await run(["send", url, "-f", "-"], { ...withSecret, input: body });
    expect(fromStdin.stdout.split("\n")[0]).toBe(`--> stdin: ${Buffer.byteLength(body)} bytes, signed`);
    expect(recorded?.body.toString("utf8")).toBe(body);
  });

  it("prints no body line for an empty answer, and exits 1 for a status that is not 2xx", async () => {
    answer = { status: 204, body: "" };
    const url = urlOf(recorder);
    const ok = await run(["send", url], withSecret);
    expect(ok.stdout.split("\n").slice(1)).toEqual([`<-- [204 No Content] POST ${url}`, ""]);
    expect(ok.code).toBe(0);
    answer = { status: 500, body: "boom" };
    const failed = await run(["send", url], withSecret);
    expect(failed.stdout.split("\n").slice(1)).toEqual([`<-- [500 Internal Server Error] POST ${url}`, "boom", ""]);
    expect([failed.code, failed.stderr]).toEqual([1, ""]);
    answer = { status: 299, body: "odd", reason: "" };
    const unnamed = await run(["send", url], withSecret);
    expect(unnamed.stdout.split("\n")[1]).toBe(`<-- [299] POST ${url}`);
    expect(unnamed.code).toBe(0);
    answer = { status: 199 + 101, body: "" };
    expect((await run(["send", url], withSecret)).code).toBe(1);
  });

  it("prints where a redirect points, resolved against the URL, and does not follow it", async () => {
    const url = urlOf(recorder);
    answer = { status: 308, body: "moved", headers: { location: "/v2/webhooks" } };
    const moved = await run(["send", url], withSecret);
    expect(moved.stdout.split("\n").slice(1)).toEqual([
      `<-- [308 Permanent Redirect] POST ${url}`,
      `<-- Location: ${urlOf(recorder, "/v2/webhooks")} (not followed: the service posts only to the registered URL)`,
      "moved",
      "",
    ]);
    expect(moved.code).toBe(1);
    answer = { status: 300, body: "", headers: { location: "http://[bad" } };
    expect((await run(["send", url], withSecret)).stdout.split("\n")[2]).toBe(
      "<-- Location: http://[bad (not followed: the service posts only to the registered URL)",
    );
    answer = { status: 399, body: "", headers: { location: "/x" } };
    expect((await run(["send", url], withSecret)).stdout).toContain(`<-- Location: ${urlOf(recorder, "/x")}`);
    // A redirect without a Location prints none.
    answer = { status: 300, body: "" };
    expect((await run(["send", url], withSecret)).stdout).not.toContain("Location");
    // A Location on an answer that is not a redirect is not one.
    for (const status of [201, 400]) {
      answer = { status, body: "", headers: { location: "/elsewhere" } };
      expect((await run(["send", url], withSecret)).stdout).not.toContain("Location");
    }
  });

  it("--tamper changes one byte after signing, so the receiver refuses it for the signature", async () => {
    const result = await run(["send", urlOf(receiver), "--tamper"], withSecret);
    const [sent, answered, reply] = result.stdout.split("\n");
    const match =
      /^--> flag\.updated \[evt_\w+\] \d+ bytes, signed, then byte (\d+) changed from "(\d)" to "(\d)"$/.exec(
        sent ?? "",
      );
    expect(match, sent).not.toBeNull();
    expect(Number(match?.[3])).toBe((Number(match?.[2]) + 1) % 10);
    expect(answered).toBe(`<-- [401 Unauthorized] POST ${urlOf(receiver)}`);
    expect(JSON.parse(reply ?? "").error.code).toBe("invalid_signature");
    expect([result.code, result.stderr]).toEqual([1, ""]);
  });

  it.each([
    ['{"n":1,"m":9}', '{"n":1,"m":0}', 'byte 11 changed from "9" to "0"'],
    ['{"n":"0a"}', '{"n":"1a"}', 'byte 6 changed from "0" to "1"'],
    ['{"name":"ab"}', '{"name":"aB"}', 'byte 10 changed from "b" to "B"'],
    ['{"N":"Z"}', '{"N":"z"}', 'byte 6 changed from "Z" to "z"'],
    ['{"a":"@["}', '{"A":"@["}', 'byte 2 changed from "a" to "A"'],
    ["{}", "{|", 'byte 1 changed from "}" to "|"'],
    ["[]\n", "[]\u000b", "byte 2 changed from 0xa to 0xb"],
    ["  ", " !", 'byte 1 changed from 0x20 to "!"'],
    ["~", "\u007f", 'byte 0 changed from "~" to 0x7f'],
    ["", " ", "a space added"],
    ["7", "8", 'byte 0 changed from "7" to "8"'],
    ["a", "A", 'byte 0 changed from "a" to "A"'],
    ["\u007f", "~", 'byte 0 changed from 0x7f to "~"'],
  ])("--tamper on %j sends %j (%s), signed as the original", async (original, tampered, description) => {
    answer = { status: 202, body: "" };
    const path = file("tamper.json", original);
    const result = await run(["send", urlOf(recorder), "-f", path, "--tamper"], withSecret);
    // The whole description, the byte before included: a file's body is a Buffer, whose slice()
    // did not copy, so the line once showed the new byte twice.
    const line = result.stdout.split("\n")[0] ?? "";
    expect(line).toBe(`--> ${path}: ${Buffer.byteLength(tampered)} bytes, signed, then ${description}`);
    expect(recorded?.body.toString("latin1")).toBe(tampered);
    expect(recorded?.headers["service-signature"]).toBe(hmac(original));
  });

  it("refuses its usage mistakes before sending anything", async () => {
    const cases: [string[], string][] = [
      [["send"], "missing <url>, e.g. http://localhost:3000/webhooks"],
      [["send", "http://127.0.0.1/", "http://127.0.0.2/"], "expected one <url>, got 2 arguments"],
      [["send", "localhost:3000"], 'invalid URL "localhost:3000": only http:// and https:// are supported'],
      [["send", "ftp://127.0.0.1/"], 'invalid URL "ftp://127.0.0.1/": only http:// and https:// are supported'],
      [["send", "not a url"], 'invalid URL "not a url", expected e.g. http://localhost:3000/webhooks'],
      [
        ["send", "http://127.0.0.1/", "--type", "flag.archived"],
        'unknown event type "flag.archived"; use one of flag.updated, flag.created, flag.deleted, rollout.step, rollout.guard_triggered',
      ],
      [
        ["send", "http://127.0.0.1/", "--type", "rollout.step", "-f", "x.json"],
        "--type and --file cannot be used together: the file is sent as it is",
      ],
      [
        ["send", "http://127.0.0.1/", "--timeout", "soon"],
        '--timeout must be a positive number of seconds, got "soon"',
      ],
      [["send", "http://127.0.0.1/", "--timeout", "0"], '--timeout must be a positive number of seconds, got "0"'],
      [["send", "http://127.0.0.1/", "--timeout=-1"], '--timeout must be a positive number of seconds, got "-1"'],
      [
        ["send", "http://127.0.0.1/", "--timeout", "Infinity"],
        '--timeout must be a positive number of seconds, got "Infinity"',
      ],
    ];
    for (const [args, message] of cases) {
      recorded = undefined;
      const result = await run(args, withSecret);
      expectOneLineError(result, 2, message, "send");
      expect(result.stdout).toBe("");
    }
    expectOneLineError(
      await run(["send", urlOf(recorder)]),
      2,
      "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET",
      "send",
    );
    expect(recorded).toBeUndefined();
    expect(
      (await run(["send", urlOf(recorder), "--type", "flag.updated", "-f", file("ok.json", "{}")], withSecret)).code,
    ).toBe(0);
    expectOneLineError(
      await run(["send", urlOf(recorder), "-f", join(dir, "missing.json")], withSecret),
      1,
      `cannot read ${dir}/missing.json: no such file`,
    );
  });

  describe("says in one line why no answer came", () => {
    it("nothing listens", async () => {
      const url = `http://127.0.0.1:${closedPort}/webhooks`;
      const result = await run(["send", url], withSecret);
      expectOneLineError(
        result,
        1,
        `could not reach ${url}: connection refused (is your receiver running on port ${closedPort}?)`,
      );
      expect(result.stdout).toMatch(/^--> flag\.updated \[evt_\w+\] \d+ bytes, signed\n$/);
      const https = `https://127.0.0.1:${closedPort}/`;
      expectOneLineError(
        await run(["send", https], withSecret),
        1,
        `could not reach ${https}: connection refused (is your receiver running on port ${closedPort}?)`,
      );
    });

    it("the default ports", async () => {
      // Port 80 and 443 on loopback: nothing listens there in the tests.
      expectOneLineError(
        await run(["send", "http://127.0.0.1/"], withSecret),
        1,
        "could not reach http://127.0.0.1/: connection refused (is your receiver running on port 80?)",
      );
      expectOneLineError(
        await run(["send", "https://127.0.0.1/x"], withSecret),
        1,
        "could not reach https://127.0.0.1/x: connection refused (is your receiver running on port 443?)",
      );
    });

    it("the receiver is silent past --timeout", async () => {
      const url = urlOf(silent);
      expectOneLineError(
        await run(["send", url, "--timeout", "0.2"], withSecret),
        1,
        `no answer from ${url} within 0.2 s`,
      );
    });

    it("the host does not exist", async () => {
      expectOneLineError(
        await run(["send", "http://no-such-host.invalid:8080/hook"], withSecret),
        1,
        "could not reach http://no-such-host.invalid:8080/hook: host no-such-host.invalid not found",
      );
    });

    it("the host is unreachable: the system's reason, which names its code already", async () => {
      // 2001:db8::/32 is for documentation: no route leads there, so on this machine the connect
      // fails at once with the system's reason. A network that silently drops the packets instead
      // gives the timeout's message: either way one line, exit 1.
      const url = "http://[2001:db8::1]:81/";
      const result = await run(["send", url, "--timeout", "2"], withSecret);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /^flag-webhooks: (could not reach http:\/\/\[2001:db8::1\]:81\/: connect (E[A-Z]+) 2001:db8::1:81|no answer from http:\/\/\[2001:db8::1\]:81\/ within 2 s)\n$/,
      );
    });

    it("refuses a URL with credentials before sending, and never prints the password", async () => {
      const result = await run(["send", "http://user:pw-secret@127.0.0.1:1/"], withSecret);
      expectOneLineError(result, 2, "<url> must not contain credentials", "send");
      expect(result.stderr + result.stdout).not.toContain("pw-secret");
    });

    it("fetch refuses the port", async () => {
      expectOneLineError(
        await run(["send", "http://127.0.0.1:6000/"], withSecret),
        1,
        "could not reach http://127.0.0.1:6000/: fetch refuses port 6000 (a port browsers block); use another port",
      );
    });

    it("the connection closes before an answer, or the answer is not HTTP", async () => {
      const dropping = createNetServer((socket) => socket.once("data", () => socket.destroy()));
      const resetting = createNetServer((socket) => socket.once("data", () => socket.resetAndDestroy()));
      const garbage = createNetServer((socket) => socket.once("data", () => socket.end("NOT HTTP AT ALL\r\n\r\n")));
      await Promise.all(
        [dropping, resetting, garbage].map(
          (server) => new Promise<void>((done) => server.listen(0, "127.0.0.1", done)),
        ),
      );
      try {
        const a = urlOf(dropping);
        expectOneLineError(
          await run(["send", a], withSecret),
          1,
          `could not reach ${a}: the connection closed before an answer`,
        );
        const reset = urlOf(resetting);
        expectOneLineError(
          await run(["send", reset], withSecret),
          1,
          `could not reach ${reset}: the connection closed before an answer`,
        );
        const b = urlOf(garbage);
        expectOneLineError(await run(["send", b], withSecret), 1, `could not reach ${b}: the answer is not HTTP/1.1`);
        // TLS to a plain HTTP server: the TLS library's reason, followed by its code.
        // (OpenSSL's reason ends in a newline, which makes this error two lines: reported separately.)
        const c = urlOf(recorder).replace("http:", "https:");
        const tls = await run(["send", c], withSecret);
        expect(tls.code).toBe(1);
        expect(tls.stderr.startsWith(`flag-webhooks: could not reach ${c}: `)).toBe(true);
        expect(tls.stderr).toMatch(/wrong version number[\s\S]* \(ERR_SSL_WRONG_VERSION_NUMBER\)\n$/);
      } finally {
        await Promise.all([dropping, resetting, garbage].map((server) => new Promise((done) => server.close(done))));
      }
    });
  });
});
