import { sign } from "../signature.js";
import { readBody } from "./body.js";
import { type Command, secretFrom, secretOption, UsageError } from "./command.js";

export const signCommand: Command = {
  name: "sign",
  summary: "Print the Service-Signature of a body",
  usage: "flag-webhooks sign [file|-] [options]",
  description:
    "Prints the lowercase hex HMAC-SHA256 of the file's exact bytes (or of stdin when the file is - or\n" +
    "absent), keyed with the secret: the value the service puts in the Service-Signature header.",
  options: { secret: secretOption },
  examples: [
    "flag-webhooks sign event.json",
    "printf '%s' \"$BODY\" | flag-webhooks sign",
    'curl -H "service-signature: $(flag-webhooks sign event.json)" --data-binary @event.json http://localhost:3000/webhooks',
  ],
  async run({ values, positionals, env, stdin, stdout, stderr }) {
    if (positionals.length > 1) throw new UsageError(`expected at most one file, got ${positionals.length}`);
    const secret = secretFrom(values, env);
    const body = await readBody(positionals[0], stdin, stderr);
    if (body.bytes.byteLength === 0) stderr.write(`Note: the body from ${body.source} is empty.\n`);
    stdout.write(`${await sign({ secret, payload: body.bytes })}\n`);
    return 0;
  },
};
