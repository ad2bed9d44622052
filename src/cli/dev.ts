import { createEmulator, type Delivery, type Emulator } from "../emulator/index.js";
import { EVENT_TYPES } from "../emulator/store.js";
import { isLoopbackHost } from "../emulator/validate.js";
import { type Command, UsageError } from "./command.js";

/** The environment variable `dev` reads its API token from when `--token` is not given. */
const TOKEN_ENV = "FLAG_WEBHOOKS_EMULATOR_TOKEN";
const PROJECT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** The emulator's option names, as this command spells them. */
const OPTION_NAMES = new Map([
  ["stateFile", "--state"],
  ["token", "--token"],
  ["host", "--host"],
  ["port", "--port"],
]);

function port(value: unknown): number {
  const text = String(value);
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

function projectId(value: unknown): string {
  // Stryker disable next-line StringLiteral: main() runs commands with parseArgs values, which always hold the option's default
  const text = String(value ?? "default");
  if (!PROJECT.test(text)) {
    throw new UsageError(
      `--project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit, not "${text}"`,
    );
  }
  return text;
}

/** An emulator option error (a TypeError naming the option) in this command's words. */
function usageOf(error: TypeError): UsageError {
  return new UsageError(
    error.message.replace(
      // Stryker disable next-line Regex: every emulator option error starts with this text, so the anchor changes nothing
      /^flag-webhooks\/emulator: option "(\w+)"/,
      // Stryker disable next-line StringLiteral: the emulator options dev passes that can be refused (token, stateFile, host) are all in OPTION_NAMES
      (_, name: string) => OPTION_NAMES.get(name) ?? `--${name}`,
    ),
  );
}

interface Forwarded {
  id: string;
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
  if (kept) return { id: kept.id };
  const response = await fetch(`${emulator.url}/projects/${encodeURIComponent(project)}/webhooks`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ url, events: EVENT_TYPES }),
  });
  const created = (await response.json()) as { id?: string; secret?: string; error?: { message: string } };
  if (!response.ok || !created.id || !created.secret) {
    throw new UsageError(`--forward: ${created.error?.message ?? `HTTP ${response.status}`}`);
  }
  return { id: created.id, secret: created.secret };
}

function line(delivery: Delivery): string | undefined {
  const last = delivery.attempts.at(-1);
  if (!last) return undefined;
  const outcome = last.status ?? last.error;
  const what = `${delivery.event.type} ${delivery.event.environment}${delivery.kind === "event" ? "" : ` (${delivery.kind})`}`;
  const next =
    delivery.state === "pending"
      ? // Stryker disable next-line OptionalChaining: a pending delivery always has its nextAttemptAt
        `, attempt ${delivery.attempts.length + 1} at ${delivery.nextAttemptAt?.slice(11, 19)}`
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
  async run({ values, env, stdout, stderr }) {
    // Everything the user typed is checked before anything starts or is printed.
    const forward = forwardUrl(values.forward);
    const project = projectId(values.project);
    const token = (values.token as string | undefined) ?? env[TOKEN_ENV];
    // Stryker disable next-line StringLiteral: main() runs commands with parseArgs values, which always hold the option's default
    const host = String(values.host ?? "127.0.0.1");
    const stateFile = values.state === undefined ? undefined : String(values.state);
    if (stateFile === "") throw new UsageError("--state needs a file path");
    let emulator: Emulator;
    try {
      emulator = await createEmulator({
        // Stryker disable next-line StringLiteral: main() runs commands with parseArgs values, which always hold the option's default
        port: port(values.port ?? "4000"),
        host,
        // Stryker disable next-line ConditionalExpression: equivalent: createEmulator reads a token or a state file given as undefined as not given (the spreads are for exactOptionalPropertyTypes)
        ...(token !== undefined ? { token } : {}),
        // Stryker disable next-line ConditionalExpression: equivalent, as above
        ...(stateFile !== undefined ? { stateFile } : {}),
        onDelivery(delivery) {
          const text = line(delivery);
          // Stryker disable next-line ConditionalExpression: equivalent: writing "" prints nothing
          if (text) stdout.write(text);
        },
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EADDRINUSE") {
        stderr.write(`flag-webhooks: port ${String(values.port ?? "4000")} is in use; pass --port <port>\n`);
        return 1;
      }
      // EINVAL: an IPv6 link-local address (fe80::...), which needs a zone that --host cannot spell.
      if (code === "EADDRNOTAVAIL" || code === "EINVAL" || code === "ENOTFOUND" || code === "EAI_AGAIN") {
        throw new UsageError(`--host ${host} is not an address of this machine`);
      }
      if (error instanceof TypeError) {
        const usage = usageOf(error);
        if (token !== undefined && values.token === undefined && usage.message.startsWith("--token")) {
          usage.message = usage.message.replace("--token", `$${TOKEN_ENV}`);
        }
        throw usage;
      }
      throw error;
    }

    // Stopped on the first SIGINT or SIGTERM, whatever happens while it stops; a second one ends
    // the process at once (the handlers are gone by then).
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

    let forwarded: Forwarded | undefined;
    try {
      if (forward) forwarded = await forwardTo(emulator, project, forward);
    } catch (error) {
      // Ending with an error, it leaves no handler behind to swallow the host process's next Ctrl+C.
      stop();
      await emulator.close();
      throw error;
    }

    if (!isLoopbackHost(host)) {
      stderr.write(
        `flag-webhooks dev: listening on ${host}: anyone who can reach it can use the API with the token; the page and API answer only requests addressed to this address or to loopback\n`,
      );
    }
    const lines = [
      "flag-webhooks emulator",
      `  page   ${emulator.pageUrl}`,
      `  API    ${emulator.url}`,
      `  token  ${emulator.token}`,
    ];
    // Stryker disable next-line LogicalOperator: forwarded is set only when forward is
    if (forward && forwarded) {
      lines.push(`  webhook ${forwarded.id} → ${forward} (project ${project}, every event, every environment)`);
      if (forwarded.secret) {
        lines.push(`  secret ${forwarded.secret}`, "         shown once: give it to your app as its webhook secret");
      } else {
        lines.push(`         kept in ${stateFile}: its secret is the one printed when it was registered`);
      }
    }
    stdout.write(`${lines.join("\n")}\nCtrl+C to stop.\n\n`);

    await stopped;
    try {
      await emulator.close();
    } finally {
      stdout.write("flag-webhooks dev: stopped\n");
    }
    return 0;
  },
};
