import { type Command, type CommandOption, SECRET_ENV } from "./command.js";

/** The option every command gets from main.ts; `-h` and `--help` are reserved. */
export function helpOption(command: Command): CommandOption {
  return { type: "boolean", short: "h", description: `Show this help for ${command.name}` };
}

/** The help of one command, generated from the option table that parses its options. */
export function commandHelp(command: Command): string {
  const options = { ...command.options, help: helpOption(command) };
  const lines = [command.description ?? `${command.summary}.`, "", "Usage:", `  ${command.usage}`, "", "Options:"];
  const rows = Object.entries(options).map(([name, option]) => {
    const short = option.short ? `-${option.short}, ` : "    ";
    const value = option.type === "string" ? ` <${option.valueName ?? "value"}>` : "";
    const fallback = option.default === undefined || option.default === false ? "" : ` (default: ${option.default})`;
    return [`${short}--${name}${value}`, `${option.description}${fallback}`] as const;
  });
  lines.push(...table(rows));
  if (command.examples?.length) lines.push("", "Examples:", ...command.examples.map((example) => `  $ ${example}`));
  return `${lines.join("\n")}\n`;
}

/** The top-level help: what the tool is for, every command from the table, and where the secret comes from. */
export function topHelp(commands: readonly Command[]): string {
  const lines = [
    "Send, sign and verify webhook deliveries of the feature-flag service, or run the whole service",
    "on your machine, to test a receiver while you build it. Deliveries are signed as the service",
    "signs them (Service-Signature: the lowercase hex HMAC-SHA256 of the body, keyed with the",
    "endpoint secret).",
    "",
    "Usage:",
    "  flag-webhooks <command> [options]",
    "",
    "Commands:",
    ...table([...commands.map((c) => [c.name, c.summary] as const), ["help", "Show the help of a command"]]),
    "",
    "Options:",
    ...table([
      ["-h, --help", "Show this help"],
      ["-v, --version", "Print the version"],
    ]),
    "",
    `The secret comes from --secret <secret> or, better, the ${SECRET_ENV} environment`,
    "variable (a --secret value stays in your shell history). It is never printed.",
    "",
    "Exit status: 0 on success; 1 when the work failed (the receiver did not answer 2xx, a signature",
    "did not match, a file or URL could not be reached); 2 when the command was used wrongly.",
    "",
    "Examples:",
    `  $ export ${SECRET_ENV}=...   # your endpoint secret`,
    "  $ flag-webhooks send http://localhost:3000/webhooks",
    "  $ flag-webhooks send http://localhost:3000/webhooks --tamper",
    "  $ flag-webhooks send http://localhost:3000/webhooks --repeat 2 -i   # the copy: a duplicate",
    "  $ flag-webhooks sign event.json",
    "  $ flag-webhooks schema sqlite > migrations/0001_flag_webhooks_inbox.sql",
    "",
    'Run "flag-webhooks <command> --help" for the options of a command.',
  ];
  return `${lines.join("\n")}\n`;
}

const WIDTH = 100;

/** Two aligned columns; the right one wraps at {@link WIDTH} under itself. */
function table(rows: readonly (readonly [string, string])[]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length));
  const indent = " ".repeat(width + 5);
  return rows.flatMap(([left, right]) => {
    const lines = [`  ${left.padEnd(width)}  `];
    for (const word of right.split(" ")) {
      const last = lines.length - 1;
      const line = lines[last] as string;
      if (line.length + 1 + word.length > WIDTH && line.trim() !== left.trim()) lines.push(`${indent}${word}`);
      else lines[last] = `${line} ${word}`;
    }
    return lines;
  });
}
