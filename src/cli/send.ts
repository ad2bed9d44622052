import type { WebhookEventType } from "../events.js";
import { SIGNATURE_HEADER, sign } from "../signature.js";
import { createEvent } from "../testing/index.js";
import { readBody } from "./body.js";
import { type Command, CommandError, secretFrom, secretOption, UsageError } from "./command.js";
import { VERSION } from "./version.js";

const TYPES: readonly WebhookEventType[] = [
  "flag.updated",
  "flag.created",
  "flag.deleted",
  "rollout.step",
  "rollout.guard_triggered",
];

export const sendCommand: Command = {
  name: "send",
  summary: "Send a signed test delivery to your receiver",
  usage: "flag-webhooks send <url> [options]",
  description:
    "Posts one delivery, signed with the secret as the service signs it, and prints the receiver's\n" +
    "status and body. The body is a fresh event of --type (a new id, createdAt now), or the exact\n" +
    "bytes of --file. Exits 0 when the receiver answers 2xx, 1 otherwise.",
  options: {
    type: {
      type: "string",
      short: "t",
      valueName: "type",
      default: "flag.updated",
      description: `The event type to generate: ${TYPES.join(", ")}`,
    },
    file: {
      type: "string",
      short: "f",
      valueName: "path",
      description: "Send this file's exact bytes instead of a generated event (- for stdin)",
    },
    tamper: {
      type: "boolean",
      description: "Change one byte after signing, to see your receiver refuse the delivery",
    },
    timeout: { type: "string", valueName: "seconds", default: "10", description: "How long to wait for the answer" },
    secret: secretOption,
  },
  examples: [
    "flag-webhooks send http://localhost:3000/webhooks",
    "flag-webhooks send http://localhost:3000/webhooks --type rollout.step",
    "flag-webhooks send http://localhost:3000/webhooks --file event.json",
    "flag-webhooks send http://localhost:3000/webhooks --tamper   # expect 401 invalid_signature",
  ],
  async run({ values, positionals, env, stdin, stdout, stderr }) {
    const [target, ...extra] = positionals;
    if (target === undefined) throw new UsageError("missing <url>, e.g. http://localhost:3000/webhooks");
    if (extra.length > 0) throw new UsageError(`expected one <url>, got ${positionals.length} arguments`);
    const url = parseUrl(target);
    const type = String(values.type);
    if (!(TYPES as readonly string[]).includes(type)) {
      throw new UsageError(`unknown event type "${type}"; use one of ${TYPES.join(", ")}`);
    }
    if (values.file !== undefined && type !== "flag.updated") {
      throw new UsageError("--type and --file cannot be used together: the file is sent as it is");
    }
    const seconds = Number(values.timeout);
    if (!(seconds > 0 && Number.isFinite(seconds))) {
      throw new UsageError(`--timeout must be a positive number of seconds, got "${values.timeout}"`);
    }
    const secret = secretFrom(values, env);

    let body: Uint8Array<ArrayBuffer>;
    let what: string;
    if (typeof values.file === "string") {
      const file = await readBody(values.file, stdin, stderr);
      body = file.bytes;
      what = `${file.source}:`;
    } else {
      const event = createEvent(type as WebhookEventType);
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
    let response: Response;
    let answer: string;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          [SIGNATURE_HEADER]: signature,
          "user-agent": `flag-webhooks/${VERSION}`,
        },
        body,
        // The receiver's own answer is what counts: a redirect is shown, not followed as a GET.
        redirect: "manual",
        signal: AbortSignal.timeout(seconds * 1000),
      });
      answer = await response.text();
    } catch (error) {
      throw new CommandError(fetchFailure(error, url, shown, seconds));
    }
    stdout.write(`<-- [${response.status}${response.statusText ? ` ${response.statusText}` : ""}] POST ${shown}\n`);
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
    return response.ok ? 0 : 1;
  },
};

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
