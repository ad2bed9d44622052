import { type ParseArgsConfig, parseArgs } from "node:util";
import { type Command, type CommandArgs, CommandError, SECRET_ENV, SECRET_MIN_LENGTH, UsageError } from "./command.js";
import { commands as defaultCommands } from "./commands.js";
import { commandHelp, helpOption, topHelp } from "./help.js";
import { echoed, printable } from "./terminal-text.js";
import { VERSION } from "./version.js";

/** The process's environment and streams, passed in so that main() can be run in-process too. */
export type Io = Omit<CommandArgs, "values" | "positionals">;

/**
 * Runs `flag-webhooks <argv>` and resolves the exit code: 0 success, 1 the work failed, 2 a
 * usage mistake. Errors are one line on stderr, never a stack, and never contain the secret.
 */
export async function main(
  argv: readonly string[],
  io: Io,
  commands: readonly Command[] = defaultCommands,
): Promise<number> {
  let command: Command | undefined;
  try {
    const [first, ...rest] = argv;
    if (first === undefined || first === "--help" || first === "-h") return print(io, topHelp(commands));
    if (first === "--version" || first === "-v") return print(io, `${VERSION}\n`);
    if (first === "help") {
      if (rest[0] === undefined) return print(io, topHelp(commands));
      return print(io, commandHelp(find(commands, rest[0])));
    }
    if (first.startsWith("-")) {
      throw new UsageError(`unknown option: ${optionName(first)} (options go after the command)`);
    }
    command = find(commands, first);
    return await runCommand(command, rest, io);
  } catch (error) {
    return report(error, io, command, secretsIn(argv, io.env));
  }
}

async function runCommand(command: Command, argv: string[], io: Io): Promise<number> {
  const options = { ...command.options, help: helpOption(command) };
  // As in gh, --help wins over any other mistake on the line (arguments after "--" are not options).
  const end = argv.indexOf("--");
  if ((end < 0 ? argv : argv.slice(0, end)).some((arg) => arg === "--help" || arg === "-h")) {
    return print(io, commandHelp(command));
  }
  const config: ParseArgsConfig["options"] = {};
  for (const [name, { type, short, default: fallback }] of Object.entries(options)) {
    config[name] = { type, ...(short ? { short } : {}), ...(fallback === undefined ? {} : { default: fallback }) };
  }
  let parsed: { values: CommandArgs["values"]; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: config, allowPositionals: true, strict: true }) as typeof parsed;
  } catch (error) {
    throw new UsageError(parseArgsProblem(error, command));
  }
  return command.run({ ...parsed, ...io });
}

function find(commands: readonly Command[], name: string): Command {
  const command = commands.find((c) => c.name === name);
  if (command) return command;
  const near = commands.find((c) => distance(c.name, name) <= 2);
  throw new UsageError(`unknown command ${echoed(name)}${near ? ` (did you mean "${near.name}"?)` : ""}`);
}

/** node:util's messages, reworded to one line that names the option the way the help does. */
function parseArgsProblem(error: unknown, command: Command): string {
  const { code, message } = error as { code?: string; message?: string };
  const text = message ?? "";
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    return `unknown option: ${optionName(/'([^']+)'/.exec(text)?.[1] ?? "")}`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    const name = /--([\w-]+)/.exec(text)?.[1] ?? "";
    if (text.includes("does not take an argument")) return `option --${name} takes no value`;
    const value = command.options[name]?.valueName ?? "value";
    return `option --${name} needs a value: --${name} <${value}> (for a value that starts with "-", write --${name}=<${value}>)`;
  }
  return text.split("\n")[0] ?? "invalid arguments";
}

/** The option's name without any `=value`: the value might be a secret. */
function optionName(arg: string): string {
  return arg.split("=")[0] ?? arg;
}

function report(error: unknown, io: Io, command: Command | undefined, secrets: string[]): number {
  const usage = error instanceof UsageError;
  let message: string;
  if (usage || error instanceof CommandError) message = error.message;
  else message = `unexpected error: ${error instanceof Error ? error.message : String(error)}`;
  // Messages are written never to hold the secret; this makes sure even of user-typed text. A
  // secret too short to be one is refused by every command, and not replaced: "***" for each "e"
  // of the message would spell it out.
  for (const secret of secrets) {
    if (secret.length >= SECRET_MIN_LENGTH) message = message.split(secret).join("***");
  }
  // Typed arguments and file paths reach messages: a control among them is shown, not acted on.
  io.stderr.write(`flag-webhooks: ${printable(message, true)}\n`);
  if (!usage) return 1;
  const help = command ? `flag-webhooks ${command.name} --help` : "flag-webhooks --help";
  io.stderr.write(`Run "${help}" for usage.\n`);
  return 2;
}

/** The secrets this run knows of: from the environment and from --secret, wherever it appears. */
function secretsIn(argv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const secrets = [env[SECRET_ENV]];
  argv.forEach((arg, i) => {
    if (arg === "--secret") secrets.push(argv[i + 1]);
    else if (arg.startsWith("--secret=")) secrets.push(arg.slice("--secret=".length));
  });
  return secrets.filter((secret): secret is string => typeof secret === "string" && secret !== "");
}

function print(io: Io, text: string): number {
  io.stdout.write(text);
  return 0;
}

/** Edit distance, to suggest the command a typo meant. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(
        (row[j] as number) + 1,
        (next[j - 1] as number) + 1,
        (row[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    row = next;
  }
  return row[b.length] as number;
}
