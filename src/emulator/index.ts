import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import {
  closeSync,
  constants,
  fchmodSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { basename, dirname, join } from "node:path";
import type { Actor } from "../events.js";
import { ApiError } from "./api-error.js";
import { type Delivery, type RetryPolicy, Sender } from "./deliveries.js";
import { readJson, sendError, sendJson, sendNoContent } from "./http.js";
import { servePage } from "./page.js";
import { EVENT_TYPES, type Flag, type Happening, Store, type StoredFlag, type StoredWebhook } from "./store.js";
import {
  createFlagInput,
  createWebhookInput,
  encodeCursor,
  hostOfAddress,
  invalid,
  isLoopbackHost,
  listQuery,
  onlyFields,
  parseHost,
  rolloutPercent,
  updateFlagInput,
} from "./validate.js";

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

const DEFAULT_ENVIRONMENTS = ["production", "staging", "development"];
const PROJECT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** Visible ASCII: what `Authorization: Bearer <token>` can carry and this server can match. */
const TOKEN = /^[\x21-\x7e]{8,200}$/;
/** At most one state file write per this many milliseconds: a burst of changes is one write. */
const SAVE_INTERVAL_MS = 100;

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

interface SavedState {
  version: 1;
  token: string;
  seq: number;
  projects: { id: string; flags: StoredFlag[]; webhooks: StoredWebhook[] }[];
  deliveries: Delivery[];
}

class EmulatorServer implements Emulator {
  // Stryker disable next-line StringLiteral: listen() sets it before createEmulator returns the emulator
  url = "";
  // Stryker disable next-line StringLiteral: listen() sets it before createEmulator returns the emulator
  pageUrl = "";
  readonly token: string;
  private readonly store: Store;
  private readonly sender: Sender;
  private readonly server: Server;
  private readonly streams = new Set<ServerResponse>();
  private readonly keepAlive: NodeJS.Timeout;
  private readonly environments: string[];
  private saveScheduled: NodeJS.Timeout | undefined;
  private lastSave = 0;
  private closed = false;
  /** The port listened on, and the hosts a `Host` header may name besides loopback. */
  // Stryker disable next-line StringLiteral: listen() sets it before the server answers its first request
  private port = "";
  private readonly ownHosts = new Set<string>();

  constructor(private readonly options: EmulatorOptions) {
    const environments = options.environments ?? DEFAULT_ENVIRONMENTS;
    if (!Array.isArray(environments) || environments.length === 0 || !environments.every((e) => PROJECT.test(e))) {
      throw new TypeError('flag-webhooks/emulator: option "environments" must be a non-empty list of keys');
    }
    if (options.token !== undefined && (typeof options.token !== "string" || !TOKEN.test(options.token))) {
      throw new TypeError(
        'flag-webhooks/emulator: option "token" must be 8 to 200 visible ASCII characters, without spaces (it is sent as Authorization: Bearer <token>)',
      );
    }
    const max = options.maxDeliveries ?? 1000;
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new TypeError('flag-webhooks/emulator: option "maxDeliveries" must be a positive integer');
    }
    this.environments = [...environments];
    const now = options.now ?? (() => new Date());
    this.store = new Store(
      {
        environments: this.environments,
        // Stryker disable next-line ArrayDeclaration: Stryker's ["Stryker was here"] names no environment (keys have no spaces), and an update names an existing environment before protection is checked
        protectedEnvironments: options.protectedEnvironments ?? [],
        actor: options.actor ?? { type: "user", email: "developer@example.com" },
        staleAfterDays: options.staleAfterDays ?? 30,
        now,
      },
      (happenings) => this.dispatch(happenings),
    );
    this.sender = new Sender(options.retry ?? {}, (delivery) => this.deliveryChanged(delivery), now, max);
    const saved = this.load();
    this.token = options.token ?? saved?.token ?? `fwe_${randomBytes(18).toString("base64url")}`;
    if (saved) for (const delivery of saved.deliveries) this.sender.restore(delivery);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error) => sendError(res, error));
    });
    this.keepAlive = setInterval(() => {
      for (const stream of this.streams) stream.write(": keep-alive\n\n");
    }, 15_000);
    this.keepAlive.unref();
  }

  async listen(): Promise<void> {
    const host = this.options.host ?? "127.0.0.1";
    const bound = hostOfAddress(host);
    if (bound === undefined) throw new TypeError(`flag-webhooks/emulator: option "host" is not an address: "${host}"`);
    // Before listening: a state file that cannot be written is a mistake to report now, not at the first change.
    try {
      this.flush();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new TypeError(
        `flag-webhooks/emulator: option "stateFile": cannot write the state file ${this.options.stateFile}: ${code}`,
        { cause: error },
      );
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.options.port ?? 0, host, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    this.port = String((this.server.address() as AddressInfo).port);
    // Every address listened on may be named in Host: all of this machine's for 0.0.0.0 and ::.
    const unspecified = bound === "0.0.0.0" || bound === "[::]";
    if (unspecified) {
      for (const list of Object.values(networkInterfaces())) {
        // Stryker disable next-line ArrayDeclaration: networkInterfaces() gives a list for every interface it names
        for (const { address } of list ?? []) {
          // Stryker disable next-line Regex,StringLiteral: Node gives IPv6 addresses without a %zone (the scope is its own field, scopeid), so no replacement changes one
          const name = hostOfAddress(address.replace(/%.*$/, ""));
          if (name) this.ownHosts.add(name);
        }
      }
    } else this.ownHosts.add(bound);
    const shown = unspecified ? (bound === "[::]" ? "[::1]" : "127.0.0.1") : bound;
    this.url = `http://${shown}:${this.port}/v2`;
    this.pageUrl = `http://${shown}:${this.port}/#token=${encodeURIComponent(this.token)}`;
  }

  /** Undoes a start that failed: no delivery restored from the state file goes out, nothing is saved. */
  discard(): void {
    // Stryker disable next-line BooleanLiteral: after a failed start nothing can change or save: the sender is closed and the emulator never returned
    this.closed = true;
    clearInterval(this.keepAlive);
    clearTimeout(this.saveScheduled);
    this.sender.close();
    // Stryker disable next-line ConditionalExpression: a start fails only before the server listens, so it never is here (and closing one that is not is harmless)
    if (this.server.listening) this.server.close();
  }

  deliveries(): Delivery[] {
    return structuredClone([...this.sender.deliveries.values()]);
  }

  settled(): Promise<void> {
    return this.sender.settled();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.keepAlive);
    this.sender.close();
    try {
      this.flush();
    } catch (error) {
      // The server still stops: a process waiting on close() must be able to exit.
      process.emitWarning(`flag-webhooks/emulator: could not save ${this.options.stateFile}: ${String(error)}`);
    }
    this.closed = true;
    clearTimeout(this.saveScheduled);
    for (const stream of this.streams) stream.end();
    this.streams.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- requests

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.checkHost(req.headers.host);
    // Stryker disable next-line StringLiteral: node:http always sets req.url on a server's request
    const target = req.url ?? "/";
    let url: URL;
    try {
      url = new URL(target, "http://emulator.invalid");
    } catch {
      // A target such as `//[` that the URL parser cannot read is the client's mistake, not ours.
      throw new ApiError(400, "invalid_request", "the request target is not a valid URL");
    }
    const path = url.pathname;
    if (path === "/v2" || path.startsWith("/v2/") || path.startsWith("/_emulator/")) this.checkOrigin(req);
    if (path === "/v2" || path.startsWith("/v2/")) {
      this.authorize(req.headers.authorization);
      return this.api(req, res, path.slice(3), url.searchParams);
    }
    if (path.startsWith("/_emulator/")) {
      if (path === "/_emulator/events" && req.method === "GET") {
        this.authorize(`Bearer ${url.searchParams.get("token") ?? ""}`);
        return this.openStream(req, res);
      }
      this.authorize(req.headers.authorization);
      return this.emulatorApi(req, res, path.slice("/_emulator".length));
    }
    if (req.method === "GET" || req.method === "HEAD") {
      if (servePage(path, res, { url: this.url })) return;
    }
    throw new ApiError(404, "not_found", `nothing at ${req.method} ${path}`);
  }

  /**
   * DNS-rebinding guard: a web page whose name resolves to this machine sends its own name in
   * `Host`. Only names of loopback (`localhost`, `127.0.0.0/8`, `[::1]`, in any spelling) or of
   * the address listened on, with the port listened on, are answered, whatever the bind address.
   */
  private checkHost(header: string | undefined): void {
    // Stryker disable next-line StringLiteral: parseHost refuses Stryker's text with spaces as it refuses "" (a request without Host)
    const host = parseHost(header ?? "");
    const port = host?.port === "" ? "80" : host?.port;
    if (!host || port !== this.port || !(isLoopbackHost(host.hostname) || this.ownHosts.has(host.hostname))) {
      throw new ApiError(
        403,
        "forbidden",
        "the emulator answers only requests addressed to localhost, 127.0.0.1, [::1] or the address it listens on, with its port",
      );
    }
  }

  /** Browsers say where a request comes from: the API and the page's calls answer only this origin. */
  private checkOrigin(req: IncomingMessage): void {
    const site = req.headers["sec-fetch-site"];
    const origin = req.headers.origin;
    const sameOrigin = origin === undefined || origin === `http://${req.headers.host}`;
    if ((site !== undefined && site !== "same-origin" && site !== "none") || !sameOrigin) {
      throw new ApiError(403, "forbidden", "the emulator answers no request made by another origin's page");
    }
  }

  private authorize(header: string | undefined): void {
    // The scheme is case-insensitive (RFC 9110 section 11.1).
    // Stryker disable next-line StringLiteral: without the header, Stryker's text with spaces matches no more than "" does
    const match = /^Bearer +(\S+)$/i.exec(header ?? "");
    // Compared as digests, in constant time, so neither the token's length nor its prefix leaks.
    const digest = (value: string) => createHash("sha256").update(value).digest();
    if (!match?.[1] || !timingSafeEqual(digest(match[1]), digest(this.token))) {
      throw new ApiError(
        401,
        "unauthorized",
        "the API token is missing or invalid (send Authorization: Bearer <token>)",
        {
          "www-authenticate": 'Bearer realm="flag-webhooks emulator"',
        },
      );
    }
  }

  private async api(req: IncomingMessage, res: ServerResponse, path: string, search: URLSearchParams): Promise<void> {
    const route = /^\/projects\/([^/]+)\/(flags|webhooks)(?:\/([^/]+))?$/.exec(path);
    if (!route) throw new ApiError(404, "not_found", `no endpoint at ${path || "/"}`);
    const project = segment(route[1] as string, "project");
    if (!PROJECT.test(project)) {
      throw invalid(
        "project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit",
      );
    }
    const collection = route[2];
    const id = route[3] === undefined ? undefined : segment(route[3], collection === "flags" ? "key" : "id");
    // Stryker disable next-line StringLiteral: node:http always sets req.method on a server's request
    const method = req.method ?? "GET";
    const allow = (methods: string) =>
      new ApiError(405, "method_not_allowed", `${method} is not allowed here (allowed: ${methods})`, {
        allow: methods,
      });

    if (collection === "flags" && id === undefined) {
      if (method === "GET") {
        const query = listQuery(search);
        const page = this.store.list(project, query);
        return sendJson(res, 200, { data: page.flags, ...(page.next ? { next: encodeCursor(page.next) } : {}) });
      }
      if (method === "POST") {
        const input = createFlagInput(await readJson(req));
        return sendJson(res, 201, this.store.create(project, input));
      }
      throw allow("GET, POST");
    }
    if (collection === "flags" && id !== undefined) {
      if (method === "PATCH") {
        const body = await readJson(req);
        this.store.find(project, id);
        return sendJson(res, 200, this.store.update(project, id, updateFlagInput(body)));
      }
      if (method === "DELETE") {
        this.store.delete(project, id);
        return sendNoContent(res);
      }
      throw allow("PATCH, DELETE");
    }
    if (id === undefined) {
      if (method === "POST") {
        const input = createWebhookInput(await readJson(req), this.environments);
        const webhook = this.store.addWebhook(project, input);
        this.stateChanged();
        // Spec section 2: the secret is returned here and never again.
        const { createdAt: _, ...created } = webhook;
        return sendJson(res, 201, created);
      }
      throw allow("POST");
    }
    if (method === "DELETE") {
      const webhook = this.store.removeWebhook(project, id);
      this.sender.cancel(webhook.id);
      this.stateChanged();
      return sendNoContent(res);
    }
    throw allow("DELETE");
  }

  /** Endpoints of the emulator itself (not the service's): state for the page, rollout events, redelivery. */
  private async emulatorApi(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    // Stryker disable next-line StringLiteral: node:http always sets req.method on a server's request
    const method = req.method ?? "GET";
    const allow = (methods: string) =>
      new ApiError(405, "method_not_allowed", `${method} is not allowed here (allowed: ${methods})`, {
        allow: methods,
      });
    if (path === "/state" || path === "/events") {
      if (path === "/state" && method === "GET") return sendJson(res, 200, this.snapshot());
      throw allow("GET");
    }
    const rollout = /^\/projects\/([^/]+)\/flags\/([^/]+)\/(rollout-step|guard-triggered)$/.exec(path);
    if (rollout && method !== "POST") throw allow("POST");
    if (rollout) {
      const project = segment(rollout[1] as string, "project");
      const key = segment(rollout[2] as string, "key");
      const body = await readJson(req);
      this.store.find(project, key);
      const environment = body.environment;
      if (typeof environment !== "string") throw invalid("environment is required and must be a string");
      if (rollout[3] === "rollout-step") {
        onlyFields(body, ["environment", "percent"]);
        const percent = rolloutPercent(body.percent, "percent");
        return sendJson(res, 200, this.store.rolloutStep(project, key, environment, percent));
      }
      onlyFields(body, ["environment", "action"]);
      if (body.action !== "paused" && body.action !== "rolled_back")
        throw invalid("action must be paused or rolled_back");
      return sendJson(res, 200, this.store.guardTriggered(project, key, environment, body.action));
    }
    const copy = /^\/deliveries\/([^/]+)\/(redeliver|tampered-copy)$/.exec(path);
    if (copy && method !== "POST") throw allow("POST");
    if (copy) {
      const original = this.sender.deliveries.get(segment(copy[1] as string, "id"));
      if (!original) throw new ApiError(404, "not_found", "no such delivery");
      const webhook = this.store.projects.get(original.project)?.webhooks.get(original.webhookId);
      if (!webhook) throw new ApiError(409, "webhook_deleted", "the delivery's webhook was deleted");
      const delivery = this.sender.copy(original, copy[2] === "redeliver" ? "redelivery" : "tampered");
      return sendJson(res, 202, delivery);
    }
    throw new ApiError(404, "not_found", `no emulator endpoint at ${method} ${path}`);
  }

  private openStream(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
    });
    res.write("retry: 1000\n\n");
    this.streams.add(res);
    req.on("close", () => this.streams.delete(res));
  }

  private broadcast(event: string, data: unknown): void {
    const message = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const stream of this.streams) stream.write(message);
  }

  // ---- state

  private snapshot() {
    return {
      environments: this.environments,
      eventTypes: EVENT_TYPES,
      retry: this.sender.policy,
      projects: this.projectsView(),
      deliveries: [...this.sender.deliveries.values()],
    };
  }

  /** Projects for the page: flags newest first, webhooks without their secrets. */
  private projectsView() {
    return [...this.store.projects.values()].map((project) => ({
      id: project.id,
      flags: [...project.flags.values()].sort((a, b) => b.seq - a.seq).map((f): Flag => f.flag),
      webhooks: [...project.webhooks.values()].map(({ secret: _, ...webhook }) => webhook),
    }));
  }

  private dispatch(happenings: Happening[]): void {
    for (const happening of happenings) {
      const event = {
        id: `evt_${randomBytes(10).toString("hex")}`,
        type: happening.type,
        createdAt: (this.options.now ?? (() => new Date()))().toISOString(),
        environment: happening.environment,
        data: happening.data,
      };
      const body = JSON.stringify(event);
      for (const webhook of this.store.subscribers(happening)) {
        void this.sender.send(
          webhook,
          happening.project,
          { id: event.id, type: event.type, environment: event.environment },
          body,
        );
      }
    }
    this.stateChanged();
  }

  private stateChanged(): void {
    this.broadcast("projects", this.projectsView());
    this.save();
  }

  private deliveryChanged(delivery: Delivery): void {
    this.broadcast("delivery", delivery);
    this.save();
    try {
      // Stryker disable next-line OptionalChaining: without onDelivery the call throws a TypeError that the catch swallows, as it swallows the observer's own
      this.options.onDelivery?.(structuredClone(delivery));
    } catch {
      // A failing observer must not stop deliveries.
    }
  }

  /** Reads the state file; a problem with it is a TypeError naming the option and saying why. */
  private load(): SavedState | undefined {
    const file = this.options.stateFile;
    if (file === undefined) return undefined;
    const problem = (why: string, cause?: unknown) =>
      new TypeError(`flag-webhooks/emulator: option "stateFile": cannot read the state file ${file}: ${why}`, {
        cause,
      });
    if (typeof file !== "string" || file === "") throw problem("it must be a file path");
    let text: string;
    try {
      // Stryker disable next-line StringLiteral: without an encoding the Buffer goes to JSON.parse, which reads it as UTF-8 alike
      text = readFileSync(file, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        let folder: ReturnType<typeof statSync> | undefined;
        try {
          folder = statSync(dirname(file));
        } catch {
          // folder stays undefined: a folder that cannot be read is answered as missing, below.
        }
        if (!folder?.isDirectory()) throw problem(`its folder ${dirname(file)} does not exist`);
        return undefined;
      }
      if (code === "EISDIR") throw problem("it is a directory");
      if (code === "EACCES") throw problem("permission denied");
      throw problem(code ?? String(error), error);
    }
    let saved: SavedState;
    try {
      saved = JSON.parse(text) as SavedState;
    } catch (error) {
      throw problem(`it is not JSON (${error instanceof Error ? error.message : String(error)})`, error);
    }
    if (saved?.version !== 1 || !Array.isArray(saved.projects) || !Array.isArray(saved.deliveries)) {
      throw problem("it is not a state file of this version of the emulator");
    }
    if (typeof saved.token !== "string" || !TOKEN.test(saved.token)) throw problem("its token is not valid");
    this.store.seq = saved.seq;
    for (const p of saved.projects) {
      const project = this.store.project(p.id);
      for (const flag of p.flags) project.flags.set(flag.flag.key, flag);
      for (const webhook of p.webhooks) project.webhooks.set(webhook.id, webhook);
    }
    return saved;
  }

  /**
   * Writes the state file soon: after this tick, and at most once per SAVE_INTERVAL_MS, so a
   * burst of changes is one write. The history is bounded (maxDeliveries), so a write is too.
   */
  private save(): void {
    if (!this.options.stateFile || this.saveScheduled || this.closed) return;
    const wait = Math.max(0, this.lastSave + SAVE_INTERVAL_MS - performance.now());
    this.saveScheduled = setTimeout(() => {
      try {
        this.flush();
      } catch (error) {
        // A full disk must not stop the emulator; the next change tries again.
        process.emitWarning(`flag-webhooks/emulator: could not save ${this.options.stateFile}: ${String(error)}`);
      }
    }, wait);
  }

  private flush(): void {
    const file = this.options.stateFile;
    if (!file || this.closed) return;
    clearTimeout(this.saveScheduled);
    this.saveScheduled = undefined;
    this.lastSave = performance.now();
    const state: SavedState = {
      version: 1,
      token: this.token,
      seq: this.store.seq,
      projects: [...this.store.projects.values()].map((p) => ({
        id: p.id,
        flags: [...p.flags.values()],
        webhooks: [...p.webhooks.values()],
      })),
      deliveries: [...this.sender.deliveries.values()],
    };
    writeAtomically(file, JSON.stringify(state));
  }
}

/**
 * Writes a file that holds secrets: to a fresh name in its folder, created exclusively (O_EXCL
 * does not follow a link planted there) with mode 0600, synced, then renamed over the file (a
 * rename replaces a link at the path, never writes through it). So every write leaves the file
 * 0600 and whole, and no planted link makes it write elsewhere.
 */
function writeAtomically(file: string, text: string): void {
  const temp = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString("hex")}.tmp`);
  const fd = openSync(
    temp,
    // Stryker disable next-line LogicalOperator: O_CREAT | O_EXCL already refuses a link at the path (EEXIST, POSIX); O_NOFOLLOW is a second guard
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0),
    0o600,
  );
  try {
    try {
      fchmodSync(fd, 0o600); // the umask may not widen it, and must not narrow it either
      // Stryker disable next-line StringLiteral: Buffer.from with an empty encoding name uses UTF-8
      const bytes = Buffer.from(text, "utf8");
      for (let offset = 0; offset < bytes.byteLength; ) offset += writeSync(fd, bytes, offset);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {
      // Already renamed or gone.
    }
    throw error;
  }
}

function segment(raw: string, name: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw invalid(`${name} in the path is not valid percent-encoding`);
  }
}
