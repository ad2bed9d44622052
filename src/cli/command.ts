// The shape of one subcommand of `flag-webhooks`: its options table drives both parsing
// (node:util parseArgs) and --help.

/** One subcommand of the `flag-webhooks` command. */
export interface Command {
  name: string;
  summary: string;
  usage: string;
  description?: string;
  options: Record<
    string,
    {
      type: "string" | "boolean";
      short?: string;
      description: string;
      valueName?: string;
      default?: string | boolean;
    }
  >;
  examples?: string[];
  /** Does the work and resolves the exit code. */
  run(args: {
    values: Record<string, string | boolean | undefined>;
    positionals: string[];
    env: NodeJS.ProcessEnv;
    stdout: NodeJS.WritableStream;
    stderr: NodeJS.WritableStream;
    stdin: NodeJS.ReadableStream;
  }): Promise<number>;
}

/** A mistake in how the command was called. */
export class UsageError extends Error {}
