// The executable behind package.json "bin" (built to dist/cli.js with a #!/usr/bin/env node line).
import { main } from "./main.js";

// `flag-webhooks --help | head` closes stdout early: that is not an error worth a stack.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2), {
  env: process.env,
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
});
