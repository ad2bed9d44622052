import type { WebhookEventType } from "../events.js";
import { SIGNATURE_HEADER, sign } from "../signature.js";
import { DUPLICATE_HEADER } from "../store-contract/enlist.js";
import { createEvent } from "../testing/index.js";
import { readBody } from "./body.js";
import { type Command, type CommandArgs, CommandError, secretFrom, secretOption, UsageError } from "./command.js";
import { VERSION } from "./version.js";

const TYPES: readonly WebhookEventType[] = [
  "flag.updated",
  "flag.created",
  "flag.deleted",
  "rollout.step",
  "rollout.guard_triggered",
];

/** The most copies `--repeat` sends: enough to see a duplicate, never a flood. */
const REPEAT_MAX = 100;

/** What one run sends: the signed bytes, how often, and how to show them and their answers. */
interface Sending {
  url: URL;
  /** The URL as printed: without any fragment. */
  shown: string;
  body: Uint8Array<ArrayBuffer>;
  signature: string;
  seconds: number;
  repeat: number;
  /** Print every header of each answer (`-i`). */
  include: boolean;
}

export const sendCommand: Command = {
  name: "send",
  summary: "Send a signed test delivery to your receiver",
  usage: "flag-webhooks send <url> [options]",
  description:
    "Posts one delivery, signed with the secret as the service signs it, and prints the receiver's\n" +
    "status and body. The body is a fresh event of --type (a new id, createdAt now), or the exact\n" +
    "bytes of --file. The service sends an event again when it saw no 2xx, with the same id: --id\n" +
    "and --repeat do the same, so that a receiver that dedupes answers the copy as a duplicate\n" +
    "(204, Webhook-Duplicate: true). Exits 0 when every answer is 2xx, 1 otherwise.",
  options: {
    type: {
      type: "string",
      short: "t",
      valueName: "type",
      default: "flag.updated",
      description: `The event type to generate: ${TYPES.join(", ")}`,
    },
    id: {
      type: "string",
      valueName: "id",
      description: "The generated event's id (default: a new evt_ id): run again with the same id to resend the event",
    },
    file: {
      type: "string",
      short: "f",
      valueName: "path",
      description: "Send this file's exact bytes instead of a generated event (- for stdin)",
    },
    repeat: {
      type: "string",
      short: "n",
      valueName: "count",
      default: "1",
      description: `Send the same signed delivery this many times (1 to ${REPEAT_MAX}), one after the other`,
    },
    include: {
      type: "boolean",
      short: "i",
      description: "Print the headers of each answer, as curl -i does",
    },
    tamper: {
      type: "boolean",
      description: "Change one byte after signing, to see your receiver refuse the delivery",
    },
    timeout: { type: "string", valueName: "seconds", default: "10", description: "How long to wait for each answer" },
    secret: secretOption,
  },
  examples: [
    "flag-webhooks send http://localhost:3000/webhooks",
    "flag-webhooks send http://localhost:3000/webhooks --type rollout.step",
    "flag-webhooks send http://localhost:3000/webhooks --file event.json",
    "flag-webhooks send http://localhost:3000/webhooks --repeat 2 -i   # the copy: 204, webhook-duplicate: true",
    "flag-webhooks send http://localhost:3000/webhooks --id evt_retry_1   # again later, the same event",
    "flag-webhooks send http://localhost:3000/webhooks --tamper   # expect 401 invalid_signature",
  ],
  async run({ values, positionals, env, stdin, stdout, stderr }) {
    const [target, ...extra] = positionals;
    if (target === undefined) throw new UsageError("missing <url>, e.g. http://localhost:3000/webhooks");
    if (extra.length > 0) throw new UsageError(`expected one <url>, got ${positionals.length} arguments`);
    const url = parseUrl(target);
    const type = checkBodyOptions(values);
    const seconds = Number(values.timeout);
    if (!(seconds > 0 && Number.isFinite(seconds))) {
      throw new UsageError(`--timeout must be a positive number of seconds, got "${values.timeout}"`);
    }
    const repeat = parseRepeat(values.repeat);
    const secret = secretFrom(values, env);

    let body: Uint8Array<ArrayBuffer>;
    let what: string;
    if (typeof values.file === "string") {
      const file = await readBody(values.file, stdin, stderr);
      body = file.bytes;
      what = `${file.source}:`;
    } else {
      const event = createEvent(type, typeof values.id === "string" ? { id: values.id } : {});
      body = new TextEncoder().encode(JSON.stringify(event));
      what = `${event.type} [${event.id}]`;
    }
    const signature = await sign({ secret, payload: body });
    let signed = "signed";
    if (values.tamper === true) {
      const change = tamper(body);
      body = change.body;
      signed = `signed, then ${change.description}`;
    }
    stdout.write(`--> ${what} ${body.byteLength} bytes, ${signed}\n`);
    const shown = `${url.protocol}//${url.host}${url.pathname}${url.search}`;
    const sending: Sending = { url, shown, body, signature, seconds, repeat, include: values.include === true };
    let allOk = true;
    for (let copy = 1; copy <= repeat; copy++) {
      if (copy > 1) stdout.write(`--> the same delivery again (${copy} of ${repeat}): the same bytes and signature\n`);
      if (!(await post(sending, stdout))) allOk = false;
    }
    return allOk ? 0 : 1;
  },
};

/** The event type to generate, once the body's options agree with each other. */
function checkBodyOptions(values: CommandArgs["values"]): WebhookEventType {
  const type = String(values.type);
  if (!(TYPES as readonly string[]).includes(type)) {
    throw new UsageError(`unknown event type "${type}"; use one of ${TYPES.join(", ")}`);
  }
  if (values.file !== undefined && type !== "flag.updated") {
    throw new UsageError("--type and --file cannot be used together: the file is sent as it is");
  }
  if (values.file !== undefined && values.id !== undefined) {
    throw new UsageError("--id and --file cannot be used together: the file's event has its own id");
  }
  if (values.id === "") throw new UsageError("--id must not be empty");
  return type as WebhookEventType;
}

function parseRepeat(value: CommandArgs["values"][string]): number {
  const text = String(value);
  const count = Number(text);
  if (!/^\d+$/.test(text) || count < 1 || count > REPEAT_MAX) {
    throw new UsageError(`--repeat must be a whole number from 1 to ${REPEAT_MAX}, got "${text}"`);
  }
  return count;
}

/** Posts the delivery once and prints the answer; resolves whether it was 2xx. */
async function post(sending: Sending, stdout: NodeJS.WritableStream): Promise<boolean> {
  const { url, shown, seconds } = sending;
  let response: Response;
  let answer: string;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        [SIGNATURE_HEADER]: sending.signature,
        "user-agent": `flag-webhooks/${VERSION}`,
      },
      body: sending.body,
      // The receiver's own answer is what counts: a redirect is shown, not followed as a GET.
      redirect: "manual",
      signal: AbortSignal.timeout(seconds * 1000),
    });
    answer = await response.text();
  } catch (error) {
    throw new CommandError(fetchFailure(error, url, shown, seconds));
  }
  stdout.write(`<-- [${response.status}${response.statusText ? ` ${response.statusText}` : ""}] POST ${shown}\n`);
  if (sending.include) for (const [name, value] of response.headers) stdout.write(`<-- ${name}: ${value}\n`);
  else if (response.headers.get(DUPLICATE_HEADER) === "true") {
    stdout.write("<-- Webhook-Duplicate: true (the receiver had handled this event id already)\n");
  }
  const location = response.headers.get("location");
  if (location !== null && response.status >= 300 && response.status < 400) {
    // Where the receiver sends it, resolved against the URL; the service would not follow it either.
    let target = location;
    try {
      target = new URL(location, url).href;
    } catch {
      // Shown as the receiver sent it.
    }
    stdout.write(`<-- Location: ${target} (not followed: the service posts only to the registered URL)\n`);
  }
  if (answer !== "") stdout.write(answer.endsWith("\n") ? answer : `${answer}\n`);
  return response.ok;
}

function parseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`invalid URL "${text}", expected e.g. http://localhost:3000/webhooks`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`invalid URL "${text}": only http:// and https:// are supported`);
  }
  // fetch refuses them anyway, and its message would echo the password: the signature is what
  // authenticates a delivery.
  if (url.username || url.password) throw new UsageError("<url> must not contain credentials");
  return url;
}

/**
 * Changes one byte so that the body stays valid JSON (a digit becomes another digit, else a
 * letter changes case): the receiver must then refuse it for its signature alone.
 */
function tamper(original: Uint8Array): { body: Uint8Array<ArrayBuffer>; description: string } {
  // A copy, also of a Buffer (whose slice() is a view): the description shows the byte before.
  const body = new Uint8Array(original);
  let index = lastIndex(body, (b) => b >= 0x30 && b <= 0x39);
  if (index >= 0) {
    body[index] = 0x30 + (((body[index] as number) - 0x30 + 1) % 10);
  } else {
    index = lastIndex(body, (b) => (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7a);
    if (index >= 0) body[index] = (body[index] as number) ^ 0x20;
    else if (body.length > 0) {
      index = body.length - 1;
      body[index] = (body[index] as number) ^ 0x01;
    } else {
      return { body: Uint8Array.of(0x20), description: "a space added" };
    }
  }
  const show = (b: number) => (b >= 0x21 && b <= 0x7e ? `"${String.fromCharCode(b)}"` : `0x${b.toString(16)}`);
  return {
    body,
    description: `byte ${index} changed from ${show(original[index] as number)} to ${show(body[index] as number)}`,
  };
}

/** The index of the last byte that passes `test`, or -1. */
function lastIndex(bytes: Uint8Array, test: (byte: number) => boolean): number {
  return bytes.reduce((last, byte, index) => (test(byte) ? index : last), -1);
}

/** One line saying why no answer came, in the user's terms; never a stack. */
function fetchFailure(error: unknown, url: URL, shown: string, seconds: number): string {
  if (error instanceof Error && error.name === "TimeoutError") return `no answer from ${shown} within ${seconds} s`;
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? "";
  const where = `could not reach ${shown}`;
  if (code === "ECONNREFUSED") return `${where}: connection refused (is your receiver running on port ${portOf(url)}?)`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `${where}: host ${url.hostname} not found`;
  if (code === "UND_ERR_SOCKET" || code === "ECONNRESET") return `${where}: the connection closed before an answer`;
  if (cause?.message === "bad port") {
    return `${where}: fetch refuses port ${portOf(url)} (a port browsers block); use another port`;
  }
  if (code.startsWith("HPE_")) return `${where}: the answer is not HTTP/1.1`;
  const reason = cause?.message ?? (error instanceof Error ? error.message : String(error));
  return `${where}: ${reason}${code && !reason.includes(code) ? ` (${code})` : ""}`;
}

function portOf(url: URL): string {
  return url.port || (url.protocol === "https:" ? "443" : "80");
}
