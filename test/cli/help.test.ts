import { describe, expect, it } from "vitest";
import type { Command } from "../../src/cli/command.js";
import { commands } from "../../src/cli/commands.js";
import { expectOneLineError, run, withSecret } from "../support/cli.js";

// The command's help and version, in-process: the top help with every command, each command's
// help built from its option table, and how descriptions wrap at 100 columns.

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
      "  inbox    List, show, replay or purge the events an inbox kept",
      "  schema   Print the SQL that creates an inbox's table, for a migration file",
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
        "  $ flag-webhooks send http://localhost:3000/webhooks --repeat 2 -i   # the copy: a duplicate",
        "  $ flag-webhooks sign event.json",
        "  $ flag-webhooks schema sqlite > migrations/0001_flag_webhooks_inbox.sql",
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
    expect(help.stdout).toMatch(/^ {6}--timeout <seconds> +How long to wait for each answer \(default: 10\)$/m);
    expect(help.stdout).toContain(
      "      --id <id>             The generated event's id (default: a new evt_ id): run again with the\n" +
        "                            same id to resend the event\n" +
        "  -f, --file <path>         Send this file's exact bytes instead of a generated event (- for stdin)\n" +
        "  -n, --repeat <count>      Send the same signed delivery this many times (1 to 100), one after the\n" +
        "                            other (default: 1)\n" +
        "  -i, --include             Print the headers of each answer, as curl -i does\n",
    );
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
