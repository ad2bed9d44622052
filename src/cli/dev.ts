import { createEmulator, type Delivery } from "../emulator/index.js";
import { isLoopbackHost } from "../emulator/validate.js";
import { type Command, UsageError } from "./command.js";

/** The environment variable `dev` reads its API token from when `--token` is not given. */
const TOKEN_ENV = "FLAG_WEBHOOKS_EMULATOR_TOKEN";

function port(value: unknown): number {
  const text = String(value);
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535)
    throw new UsageError(`--port must be a port number, not "${text}"`);
  return Number(text);
}

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
  return url.href;
}

function line(delivery: Delivery): string | undefined {
  const last = delivery.attempts.at(-1);
  if (!last) return undefined;
  const outcome = last.status ?? last.error;
  const what = `${delivery.event.type} ${delivery.event.environment}${delivery.kind === "event" ? "" : ` (${delivery.kind})`}`;
  const next =
    delivery.state === "pending"
      ? `, attempt ${delivery.attempts.length + 1} at ${delivery.nextAttemptAt?.slice(11, 19)}`
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
      description: "Keep flags, webhooks, the token and deliveries in this file across restarts",
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
    const forward = forwardUrl(values.forward);
    const project = String(values.project ?? "default");
    const token = (values.token as string | undefined) ?? env[TOKEN_ENV];
    let emulator: Awaited<ReturnType<typeof createEmulator>>;
    try {
      emulator = await createEmulator({
        port: port(values.port ?? "4000"),
        host: String(values.host ?? "127.0.0.1"),
        ...(token ? { token } : {}),
        ...(values.state ? { stateFile: String(values.state) } : {}),
        onDelivery(delivery) {
          const text = line(delivery);
          if (text) stdout.write(text);
        },
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EADDRINUSE") {
        stderr.write(`flag-webhooks dev: port ${String(values.port ?? "4000")} is in use; pass --port <port>\n`);
        return 1;
      }
      if (error instanceof TypeError)
        throw new UsageError(error.message.replace(/^flag-webhooks\/emulator: option "(\w+)"/, "--$1"));
      throw error;
    }

    const host = String(values.host ?? "127.0.0.1");
    if (!isLoopbackHost(host)) {
      stderr.write(
        `flag-webhooks dev: listening on ${host}: anyone who can reach it can use the API and see the page\n`,
      );
    }
    stdout.write(
      [
        "flag-webhooks emulator",
        `  page   ${emulator.pageUrl}`,
        `  API    ${emulator.url}`,
        `  token  ${emulator.token}`,
        "",
      ].join("\n"),
    );
    if (forward) {
      // Registered through the emulator's own API, as an app's set-up script would do it.
      const response = await fetch(`${emulator.url}/projects/${encodeURIComponent(project)}/webhooks`, {
        method: "POST",
        headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
        body: JSON.stringify({
          url: forward,
          events: ["flag.created", "flag.updated", "flag.deleted", "rollout.step", "rollout.guard_triggered"],
        }),
      });
      const created = (await response.json()) as { id?: string; secret?: string; error?: { message: string } };
      if (!response.ok || !created.secret) {
        await emulator.close();
        throw new UsageError(`--forward: ${created.error?.message ?? `HTTP ${response.status}`}`);
      }
      stdout.write(
        [
          `  webhook ${created.id} → ${forward} (project ${project}, every event, every environment)`,
          `  secret ${created.secret}`,
          "         shown once: give it to your app as its webhook secret",
          "",
        ].join("\n"),
      );
    }
    stdout.write("Ctrl+C to stop.\n\n");

    await new Promise<void>((resolve) => {
      const stop = () => {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        resolve();
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
    await emulator.close();
    stdout.write("flag-webhooks dev: stopped\n");
    return 0;
  },
};
