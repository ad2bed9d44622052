import { createEmulator, type Delivery, type DeliveryAttempt, type Emulator } from "../emulator/index.js";
import { EVENT_TYPES } from "../emulator/store.js";
import { isLoopbackHost, PROJECT } from "../emulator/validate.js";
import { type Command, type CommandArgs, CommandError, UsageError } from "./command.js";

/** The environment variable `dev` reads its API token from when `--token` is not given. */
const TOKEN_ENV = "FLAG_WEBHOOKS_EMULATOR_TOKEN";

function port(text: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535)
    throw new UsageError(`--port must be a port number, not "${text}"`);
  return Number(text);
}

/** The --forward URL, checked as the API checks a webhook URL, before anything is started or printed. */
function forwardUrl(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    throw new UsageError(`--forward must be a URL such as http://localhost:3000/webhooks, not "${String(value)}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UsageError("--forward must be an http:// or https:// URL");
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) {
    throw new UsageError(
      "--forward must be an https:// URL, or http:// to localhost, 127.0.0.1 or [::1] (plain HTTP goes only to this machine)",
    );
  }
  if (url.username || url.password) throw new UsageError("--forward must not contain credentials");
  return url.href;
}

function projectId(text: string): string {
  if (!PROJECT.test(text)) {
    throw new UsageError(
      `--project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit, not "${text}"`,
    );
  }
  return text;
}

/**
 * An emulator option error (a TypeError naming the option) in this command's words: each option
 * as the user gave it (`--state` for `stateFile`; the token by `tokenSource`).
 */
function usageOf(error: TypeError, tokenSource: string): UsageError {
  const spelled = (name: string) => (name === "stateFile" ? "--state" : name === "token" ? tokenSource : `--${name}`);
  return new UsageError(
    error.message.replace(/flag-webhooks\/emulator: option "(\w+)"/, (_, name: string) => spelled(name)),
  );
}

/** The webhook `--forward` registered (its secret only when new) for `url`. */
interface Forwarded {
  id: string;
  url: string;
  secret?: string;
}

/**
 * The webhook for --forward: the one the state file kept for this URL and project (so a restart
 * keeps the secret the app was given), else a new one, registered through the emulator's own API
 * as an app's set-up script would do it.
 */
async function forwardTo(emulator: Emulator, project: string, url: string): Promise<Forwarded> {
  const auth = { authorization: `Bearer ${emulator.token}` };
  const origin = new URL(emulator.url).origin;
  const state = (await fetch(`${origin}/_emulator/state`, { headers: auth }).then((res) => res.json())) as {
    projects: { id: string; webhooks: { id: string; url: string }[] }[];
  };
  const kept = state.projects.find((p) => p.id === project)?.webhooks.find((w) => w.url === url);
  if (kept) return { id: kept.id, url };
  const response = await fetch(`${emulator.url}/projects/${encodeURIComponent(project)}/webhooks`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ url, events: EVENT_TYPES }),
  });
  const created = (await response.json()) as { id?: string; secret?: string; error?: { message: string } };
  if (!response.ok || !created.id || !created.secret) {
    throw new UsageError(`--forward: ${created.error?.message ?? `HTTP ${response.status}`}`);
  }
  return { id: created.id, url, secret: created.secret };
}

/** The line printed for an attempt of a delivery: what, where, how it went, and when the next is due. */
function line(delivery: Delivery, last: DeliveryAttempt): string {
  const outcome = last.status ?? last.error;
  const what = `${delivery.event.type} ${delivery.event.environment}${delivery.kind === "event" ? "" : ` (${delivery.kind})`}`;
  // A pending delivery always has the time of its next attempt.
  const next =
    delivery.state === "pending"
      ? `, attempt ${delivery.attempts.length + 1} at ${(delivery.nextAttemptAt as string).slice(11, 19)}`
      : "";
  return `${new Date().toISOString().slice(11, 19)}  ${what} → ${delivery.url}  ${outcome} in ${last.durationMs} ms${next}\n`;
}

/**
 * `flag-webhooks dev`: runs the feature-flag service's emulator on this machine (see
 * `flag-webhooks/emulator`), prints its base URL and API token, and with `--forward` registers a
 * webhook for the app's URL and prints its secret, once. Resolves when SIGINT or SIGTERM stops it.
 *
 * @example
 * ```sh
 * flag-webhooks dev --forward http://localhost:3000/webhooks
 * # then, with the printed token:
 * curl -X PATCH http://127.0.0.1:4000/v2/projects/default/flags/new-checkout \
 *   -H "authorization: Bearer $TOKEN" -H "content-type: application/json" \
 *   -d '{"environment":"production","on":true}'
 * ```
 */
export const devCommand: Command = {
  name: "dev",
  summary: "Run the feature-flag service locally, with a page to watch deliveries",
  usage: "flag-webhooks dev [--port 4000] [--forward http://localhost:3000/webhooks]",
  description:
    "Starts an emulator of the service on 127.0.0.1: the /v2 flags and webhooks API, a real signed delivery of every change to each registered webhook (retried with backoff), and a page at its root that shows every delivery live. With --forward it registers a webhook for that URL, subscribed to every event in every environment, and prints its signing secret once.",
  options: {
    port: {
      type: "string",
      short: "p",
      valueName: "port",
      description: "Port to listen on (0 picks a free one)",
      default: "4000",
    },
    forward: {
      type: "string",
      short: "f",
      valueName: "url",
      description: "Register a webhook for this URL (every event, every environment) and print its secret",
    },
    project: {
      type: "string",
      valueName: "id",
      description: "Project the --forward webhook belongs to",
      default: "default",
    },
    token: {
      type: "string",
      valueName: "token",
      description: `API token to accept (default: $${TOKEN_ENV}, else a random one)`,
    },
    state: {
      type: "string",
      valueName: "file",
      description:
        "Keep flags, webhooks, the token and the last 1000 deliveries in this file (mode 0600) across restarts; a restart reuses the --forward webhook and its secret",
    },
    host: {
      type: "string",
      valueName: "address",
      description: "Interface to listen on; anything but loopback exposes the API to your network",
      default: "127.0.0.1",
    },
  },
  examples: [
    "flag-webhooks dev",
    "flag-webhooks dev --forward http://localhost:3000/webhooks",
    "flag-webhooks dev --port 4010 --state .flag-webhooks-dev.json",
  ],
  run: runDev,
};

/** What `dev` was asked for, checked before anything starts or is printed. */
interface DevRequest {
  forward: string | undefined;
  project: string;
  host: string;
  /** The --port value as typed, and as a number. */
  portText: string;
  port: number;
  token: string | undefined;
  /** How the user gave the token: `--token`, or the environment variable. */
  tokenSource: string;
  stateFile: string | undefined;
}

async function runDev({ values, env, stdout, stderr }: CommandArgs): Promise<number> {
  const request = readRequest(values, env);
  const emulator = await startEmulator(request, stdout);
  const { stopped, stop } = stopSignal();
  let forwarded: Forwarded | undefined;
  try {
    if (request.forward) forwarded = await forwardTo(emulator, request.project, request.forward);
  } catch (error) {
    // Ending with an error, it leaves no handler behind to swallow the host process's next Ctrl+C.
    stop();
    await emulator.close();
    throw error;
  }
  if (!isLoopbackHost(request.host)) {
    stderr.write(
      `flag-webhooks dev: listening on ${request.host}: anyone who can reach it can use the API with the token; the page and API answer only requests addressed to this address or to loopback\n`,
    );
  }
  stdout.write(banner(emulator, request, forwarded));
  await stopped;
  try {
    await emulator.close();
  } finally {
    stdout.write("flag-webhooks dev: stopped\n");
  }
  return 0;
}

/**
 * The command's options, checked in the order they are listed. main() runs a command with the
 * values parseArgs gives, which hold every option's default when it is not typed.
 */
function readRequest(values: CommandArgs["values"], env: NodeJS.ProcessEnv): DevRequest {
  const forward = forwardUrl(values.forward);
  const project = projectId(values.project as string);
  const stateFile = values.state === undefined ? undefined : String(values.state);
  if (stateFile === "") throw new UsageError("--state needs a file path");
  const portText = values.port as string;
  return {
    forward,
    project,
    host: values.host as string,
    portText,
    port: port(portText),
    token: (values.token as string | undefined) ?? env[TOKEN_ENV],
    tokenSource: values.token === undefined ? `$${TOKEN_ENV}` : "--token",
    stateFile,
  };
}

/** The emulator, started as asked; its refusals in this command's words. */
async function startEmulator(request: DevRequest, stdout: NodeJS.WritableStream): Promise<Emulator> {
  try {
    return await createEmulator({
      port: request.port,
      host: request.host,
      token: request.token,
      stateFile: request.stateFile,
      onDelivery(delivery) {
        // Its last attempt, once there is one.
        for (const last of delivery.attempts.slice(-1)) stdout.write(line(delivery, last));
      },
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") throw new CommandError(`port ${request.portText} is in use; pass --port <port>`);
    // EINVAL: an IPv6 link-local address (fe80::...), which needs a zone that --host cannot spell.
    if (code === "EADDRNOTAVAIL" || code === "EINVAL" || code === "ENOTFOUND" || code === "EAI_AGAIN") {
      throw new UsageError(`--host ${request.host} is not an address of this machine`);
    }
    if (error instanceof TypeError) throw usageOf(error, request.tokenSource);
    throw error;
  }
}

/**
 * Resolves on the first SIGINT or SIGTERM, whatever happens while it stops; a second one ends
 * the process at once (the handlers are gone by then). `stop` removes them without a signal.
 */
function stopSignal(): { stopped: Promise<void>; stop: () => void } {
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => {
    stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  return { stopped, stop };
}

/** What `dev` prints once started: where the page and API are, the token, and the --forward webhook. */
function banner(emulator: Emulator, request: DevRequest, forwarded: Forwarded | undefined): string {
  const lines = [
    "flag-webhooks emulator",
    `  page   ${emulator.pageUrl}`,
    `  API    ${emulator.url}`,
    `  token  ${emulator.token}`,
  ];
  if (forwarded) {
    lines.push(
      `  webhook ${forwarded.id} → ${forwarded.url} (project ${request.project}, every event, every environment)`,
    );
    if (forwarded.secret) {
      lines.push(`  secret ${forwarded.secret}`, "         shown once: give it to your app as its webhook secret");
    } else {
      lines.push(`         kept in ${request.stateFile}: its secret is the one printed when it was registered`);
    }
  }
  return `${lines.join("\n")}\nCtrl+C to stop.\n\n`;
}
