import { describe, expect, it } from "vitest";
import type { Command } from "../../src/cli/command.js";
import { bodyFiles, expectOneLineError, hmac, run, SECRET, withSecret } from "../support/cli.js";

// What main() does before a command runs and around it, in-process: usage mistakes in one line
// with exit 2, options and positionals handed over, a command's unexpected failure, and the
// secret, which is required, checked, and never printed.

const { dir, file } = bodyFiles();

describe("usage mistakes", () => {
  it("refuses an unknown command, suggesting the one meant", async () => {
    expectOneLineError(await run(["snd"]), 2, 'unknown command "snd" (did you mean "send"?)');
    expectOneLineError(await run(["veriffy"]), 2, 'unknown command "veriffy" (did you mean "verify"?)');
    expectOneLineError(await run(["sig"]), 2, 'unknown command "sig" (did you mean "sign"?)');
    expectOneLineError(await run(["deploy"]), 2, 'unknown command "deploy"');
    expectOneLineError(await run(["help", "deploy"]), 2, 'unknown command "deploy"');
    expectOneLineError(await run(["sendxyz"]), 2, 'unknown command "sendxyz"');
  });

  it("never echoes a command typed as a connection string, and shows a typed control escaped", async () => {
    const refused = await run(["postgres://app:hunter2pw@db.internal/prod"]);
    expectOneLineError(refused, 2, "unknown command (not shown: it may hold a password)");
    expect(refused.stderr).not.toContain("hunter2pw");
    expectOneLineError(await run(["\u001b[2Jsend"]), 2, 'unknown command "\\x1b[2Jsend"');
    expectOneLineError(await run(["sign", "--\u009b31m"], withSecret), 2, "unknown option: --\\x9b31m", "sign");
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
      await run(["sign", "--secret", SECRET, "--", `${dir()}/${SECRET}`]),
      1,
      `cannot read ${dir()}/***: no such file`,
    );
    expectOneLineError(
      await run(["sign", `--secret=${SECRET}`, `${dir()}/${SECRET}`]),
      1,
      `cannot read ${dir()}/***: no such file`,
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
      `${await hmac("{}", "12345678")}\n`,
    );
  });
});
