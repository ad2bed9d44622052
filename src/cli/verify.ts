import { verifySignature } from "../signature.js";
import { readBody } from "./body.js";
import { type Command, CommandError, secretFrom, secretOption, UsageError } from "./command.js";

export const verifyCommand: Command = {
  name: "verify",
  summary: "Check a body against a Service-Signature",
  usage: "flag-webhooks verify --signature <hex> [file|-] [options]",
  description:
    "Checks, as a receiver does, that the signature is the HMAC-SHA256 of the file's exact bytes (or\n" +
    'of stdin) under the secret. Prints "ok" and exits 0, or says why not and exits 1.',
  options: {
    signature: {
      type: "string",
      short: "s",
      valueName: "hex",
      description: "The Service-Signature header to check (64 lowercase hex characters)",
    },
    secret: secretOption,
  },
  examples: [
    'flag-webhooks verify --signature "$SIGNATURE" event.json',
    'flag-webhooks verify -s "$SIGNATURE" - < body.json',
  ],
  async run({ values, positionals, env, stdin, stdout, stderr }) {
    const signature = values.signature;
    if (typeof signature !== "string") throw new UsageError("missing --signature <hex>");
    if (positionals.length > 1) throw new UsageError(`expected at most one file, got ${positionals.length}`);
    const secret = secretFrom(values, env);
    const problem = formatProblem(signature);
    if (problem) throw new CommandError(problem);
    const body = await readBody(positionals[0], stdin, stderr);
    if (!(await verifySignature({ secret, payload: body.bytes, signature }))) {
      throw new CommandError(`signature does not match: the body from ${body.source} or the secret differs`);
    }
    stdout.write("ok\n");
    return 0;
  },
};

/** Why a signature can never verify, in the receiver's terms (it compares exactly). */
function formatProblem(signature: string): string | undefined {
  if (/^[0-9a-f]{64}$/.test(signature)) return undefined;
  if (/^[0-9a-fA-F]{64}$/.test(signature)) {
    return "signature has uppercase letters: the service sends lowercase hex and receivers compare exactly";
  }
  if (/^sha256=/i.test(signature)) return 'signature has a "sha256=" prefix: the service sends the bare hex digest';
  return `signature must be 64 lowercase hex characters, got ${signature.length} characters`;
}
