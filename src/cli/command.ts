// The shape of one subcommand of `flag-webhooks`. A new subcommand is one file exporting a
// Command and one line in commands.ts; main.ts parses its options and prints its help from the
// same `options` table.

/** One option of a command: what `node:util` parseArgs takes, plus what its help shows. */
export interface CommandOption {
  type: "string" | "boolean";
  short?: string;
  /** One line for the help. */
  description: string;
  /** The placeholder the help shows for a string option's value: `--file <path>`. */
  valueName?: string;
  default?: string | boolean;
}

/** What a command's `run` gets: parsed options and positionals, and the process's streams. */
export interface CommandArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  stdin: NodeJS.ReadableStream;
}

export interface Command {
  /** The word that selects it: `"send"`. */
  name: string;
  /** One line for the top-level help. */
  summary: string;
  /** `"flag-webhooks send <url> [options]"`. */
  usage: string;
  /** A paragraph for the command's own help. */
  description?: string;
  /** Parsed with node:util parseArgs and listed in the help. `help` (`-h`) is added by main.ts: don't use it. */
  options: Record<string, CommandOption>;
  examples?: string[];
  /** Does the work and resolves the exit code. */
  run(args: CommandArgs): Promise<number>;
}

/**
 * A mistake in how the command was called: printed as one line plus a hint to --help, exit 2.
 * main() tells it apart with instanceof and prints its message only.
 */
export class UsageError extends Error {}

/**
 * A failure while doing the work (an unreadable file, an unreachable URL): printed as one line,
 * exit 1. Its message must never contain the secret.
 */
export class CommandError extends Error {}

/** The environment variable that holds the secret, so that it stays out of shell history. */
export const SECRET_ENV = "FLAG_WEBHOOKS_SECRET";

/** The `--secret` option, shared by every command that signs or verifies. It has no default: help never shows a secret. */
export const secretOption: CommandOption = {
  type: "string",
  valueName: "secret",
  description: `The endpoint secret (default: $${SECRET_ENV})`,
};

/**
 * The shortest secret the command takes. A shorter one is no endpoint's secret (the service's
 * are `whsec_` and 48 hex digits), and could not be hidden in messages: redacting `e` would
 * turn every "e" into "***" and so spell it out.
 */
export const SECRET_MIN_LENGTH = 8;

/** The secret from `--secret`, else from the environment; a UsageError naming both when neither is set. */
export function secretFrom(values: CommandArgs["values"], env: NodeJS.ProcessEnv): string {
  const secret = values.secret ?? env[SECRET_ENV];
  if (typeof secret === "string" && secret.length >= SECRET_MIN_LENGTH) return secret;
  if (typeof secret === "string" && secret !== "") {
    throw new UsageError(
      `the secret is too short to be an endpoint secret (fewer than ${SECRET_MIN_LENGTH} characters; the service's are whsec_ and 48 hex digits)`,
    );
  }
  throw new UsageError(
    values.secret === "" ? "the secret is empty" : `no secret: pass --secret <secret> or set ${SECRET_ENV}`,
  );
}
