import type { Actor } from "../events.js";
import type { Delivery, RetryPolicy } from "./deliveries.js";
import { EmulatorServer } from "./server.js";

export type { Delivery, DeliveryAttempt, RetryPolicy } from "./deliveries.js";
export type { EnvironmentState, Flag } from "./store.js";

/** Options of {@link createEmulator}; all optional. */
export interface EmulatorOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /**
   * Interface to listen on. Default `127.0.0.1` (loopback only). Whatever it is, the emulator
   * answers only requests whose `Host` names loopback or this address (DNS-rebinding guard).
   */
  host?: string;
  /** The API token to accept as `Authorization: Bearer <token>`: 8 to 200 visible ASCII characters, no spaces. Default: a random one (or the state file's). */
  token?: string;
  /** Environment keys of every project. Default `["production", "staging", "development"]`. */
  environments?: string[];
  /** Environments where an update must carry a `comment` (spec section 4). Default none. */
  protectedEnvironments?: string[];
  /** The emulator's retry policy for deliveries; see {@link RetryPolicy}. */
  retry?: RetryPolicy;
  /** Who changes flags through the API, as `data.actor` of `flag.updated`. Default `{ type: "user", email: "developer@example.com" }`. */
  actor?: Actor;
  /** A flag that is not permanent and unchanged for this many days is stale. Default 30. */
  staleAfterDays?: number;
  /** Keep projects, flags, webhooks, the token and deliveries in this JSON file across restarts. Default: memory only. */
  stateFile?: string;
  /** How many deliveries to keep (for `deliveries()`, the page and the state file): the oldest finished ones go first. Default 1000. */
  maxDeliveries?: number;
  /** Called on every change of a delivery (created, attempted, finished, cancelled), e.g. to log it. */
  onDelivery?: (delivery: Delivery) => void;
  /** The clock, for tests of createdAt and staleness. Default `() => new Date()`. */
  now?: () => Date;
}

/** A running emulator; see {@link createEmulator}. */
export interface Emulator {
  /** The API's base URL, ending in `/v2`, e.g. `http://127.0.0.1:4000/v2`. */
  readonly url: string;
  /**
   * The page's URL: the server's root with the token in its fragment (`/#token=…`), which the
   * browser keeps to itself. Open it to use the page; the root alone serves no token.
   */
  readonly pageUrl: string;
  /** The token to send as `Authorization: Bearer <token>`. */
  readonly token: string;
  /** Every delivery so far, oldest first, with its attempts. */
  deliveries(): Delivery[];
  /** Resolves once no delivery is pending: each one succeeded, failed all its attempts, or was cancelled. */
  settled(): Promise<void>;
  /** Stops the server and every delivery in progress (saving the state file first, when there is one). */
  close(): Promise<void>;
}

/**
 * Starts the feature-flag service's emulator in-process: the `/v2` API of the interface
 * document (flags and webhooks), real signed deliveries of every change to the registered
 * webhooks with retries, and a page at the root to watch them. For end-to-end tests of an app
 * that receives webhooks, and behind `flag-webhooks dev`.
 *
 * @example
 * ```ts
 * import { createEmulator } from "flag-webhooks/emulator";
 *
 * const emulator = await createEmulator({ retry: { initialDelayMs: 10 } });
 * const api = (path: string, body: unknown) =>
 *   fetch(`${emulator.url}${path}`, {
 *     method: "POST",
 *     headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
 *     body: JSON.stringify(body),
 *   }).then((res) => res.json());
 * const { secret } = await api("/projects/shop/webhooks", { url: "http://127.0.0.1:3000/webhooks", events: ["flag.created"] });
 * await api("/projects/shop/flags", { key: "new-checkout", type: "boolean" });
 * await emulator.settled();
 * await emulator.close();
 * ```
 */
export async function createEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const emulator = new EmulatorServer(options);
  try {
    await emulator.listen();
  } catch (error) {
    emulator.discard();
    throw error;
  }
  return emulator;
}
