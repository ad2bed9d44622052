// Temporary runner for `flag-webhooks dev` until the integrator wires src/cli/dev.ts into the
// `flag-webhooks` binary: `npx tsx scripts/dev.ts [--port 4000] [--forward <url>]`.
import { parseArgs } from "node:util";
import { UsageError } from "../src/cli/command.js";
import { devCommand } from "../src/cli/dev.js";

try {
  const { values, positionals } = parseArgs({ options: devCommand.options, allowPositionals: false });
  const code = await devCommand.run({
    values,
    positionals,
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
  });
  process.exit(code);
} catch (error) {
  if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
  process.stderr.write(`flag-webhooks dev: ${error.message}\n${devCommand.usage}\n`);
  process.exit(2);
}
