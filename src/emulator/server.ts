// The running emulator: its options checked, the server listening, the state (store, sender,
// state file) and what happens on each change. Requests are answered by routes.ts.
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type NetworkInterfaceInfo, networkInterfaces } from "node:os";
import { projectsView } from "./api.js";
import { type Delivery, Sender } from "./deliveries.js";
import { sendError } from "./http.js";
import type { Emulator, EmulatorOptions } from "./index.js";
import { handleRequest, type Site } from "./routes.js";
import { readStateFile, type SavedState, StateFile } from "./state-file.js";
import { type Happening, Store } from "./store.js";
import { EventStream } from "./stream.js";
import { hostOfAddress, PROJECT } from "./validate.js";

const DEFAULT_ENVIRONMENTS = ["production", "staging", "development"];
/** Visible ASCII: what `Authorization: Bearer <token>` can carry and this server can match. */
const TOKEN = /^[\x21-\x7e]{8,200}$/;
const isToken = (token: string) => TOKEN.test(token);

export class EmulatorServer implements Emulator, Site {
  // Set by listen(), before createEmulator returns the emulator and before the server answers.
  url!: string;
  pageUrl!: string;
  port!: string;
  readonly token: string;
  readonly ownHosts = new Set<string>();
  readonly environments: string[];
  readonly store: Store;
  readonly sender: Sender;
  readonly stream: EventStream;
  private readonly server: Server;
  private readonly stateFile: StateFile | undefined;
  private readonly onDelivery: (delivery: Delivery) => void;
  private readonly now: () => Date;
  private closed = false;

  constructor(private readonly options: EmulatorOptions) {
    const { environments, maxDeliveries } = checkOptions(options);
    this.environments = environments;
    this.now = options.now ?? (() => new Date());
    this.store = new Store(
      {
        environments,
        protectedEnvironments: options.protectedEnvironments,
        actor: options.actor ?? { type: "user", email: "developer@example.com" },
        staleAfterDays: options.staleAfterDays ?? 30,
        now: this.now,
      },
      (happenings) => this.dispatch(happenings),
    );
    const changed = (delivery: Delivery) => this.deliveryChanged(delivery);
    this.sender = new Sender(options.retry ?? {}, changed, this.now, maxDeliveries);
    this.onDelivery = options.onDelivery ?? ignore;
    const saved = options.stateFile === undefined ? undefined : readStateFile(options.stateFile, isToken);
    this.token = options.token ?? saved?.token ?? `fwe_${randomBytes(18).toString("base64url")}`;
    if (saved) this.restore(saved);
    this.stateFile =
      options.stateFile === undefined ? undefined : new StateFile(options.stateFile, () => this.savedState());
    this.server = createServer((req, res) => {
      handleRequest(this, req, res).catch((error) => sendError(res, error));
    });
    this.stream = new EventStream();
  }

  async listen(): Promise<void> {
    const host = this.options.host ?? "127.0.0.1";
    const bound = hostOfAddress(host);
    if (bound === undefined) throw new TypeError(`flag-webhooks/emulator: option "host" is not an address: "${host}"`);
    // Before listening: a state file that cannot be written is a mistake to report now, not at the first change.
    try {
      this.stateFile?.flush();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new TypeError(
        `flag-webhooks/emulator: option "stateFile": cannot write the state file ${this.options.stateFile}: ${code}`,
        { cause: error },
      );
    }
    this.server.listen(this.options.port ?? 0, host);
    // Rejects with the server's error (EADDRINUSE, say) when it cannot listen.
    await once(this.server, "listening");
    this.port = String((this.server.address() as AddressInfo).port);
    // Every address listened on may be named in Host: all of this machine's for 0.0.0.0 and ::.
    const unspecified = bound === "0.0.0.0" || bound === "[::]";
    for (const name of unspecified ? machineHosts() : [bound]) this.ownHosts.add(name);
    const shown = unspecified ? (bound === "[::]" ? "[::1]" : "127.0.0.1") : bound;
    this.url = `http://${shown}:${this.port}/v2`;
    this.pageUrl = `http://${shown}:${this.port}/#token=${encodeURIComponent(this.token)}`;
  }

  /**
   * Undoes a start that failed, which fails before the server listens: no delivery restored from
   * the state file goes out, and the emulator is never returned, so nothing changes or saves.
   */
  discard(): void {
    this.stream.close();
    this.sender.close();
  }

  deliveries(): Delivery[] {
    return structuredClone([...this.sender.deliveries.values()]);
  }

  settled(): Promise<void> {
    return this.sender.settled();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.sender.close();
    // The server stops even when this write fails: a process waiting on close() must be able to exit.
    this.stateFile?.flushOrWarn();
    this.closed = true;
    this.stateFile?.stop();
    this.stream.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Projects or webhooks changed: the page is told, the state file saved. */
  stateChanged(): void {
    this.stream.send("projects", projectsView(this.store));
    this.stateFile?.save();
  }

  /** The store's events: one signed delivery of each to every webhook subscribed to it. */
  private dispatch(happenings: Happening[]): void {
    for (const happening of happenings) {
      const event = {
        id: `evt_${randomBytes(10).toString("hex")}`,
        type: happening.type,
        createdAt: this.now().toISOString(),
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

  private deliveryChanged(delivery: Delivery): void {
    this.stream.send("delivery", delivery);
    this.stateFile?.save();
    try {
      this.onDelivery(structuredClone(delivery));
    } catch {
      // A failing observer must not stop deliveries.
    }
  }

  private restore(saved: SavedState): void {
    this.store.seq = saved.seq;
    for (const p of saved.projects) {
      const project = this.store.project(p.id);
      for (const flag of p.flags) project.flags.set(flag.flag.key, flag);
      for (const webhook of p.webhooks) project.webhooks.set(webhook.id, webhook);
    }
    for (const delivery of saved.deliveries) this.sender.restore(delivery);
  }

  private savedState(): SavedState {
    return {
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
  }
}

/** Checks the options taken as they are; returns the environments and how many deliveries to keep. */
function checkOptions(options: EmulatorOptions): { environments: string[]; maxDeliveries: number } {
  const environments = options.environments ?? DEFAULT_ENVIRONMENTS;
  if (!Array.isArray(environments) || environments.length === 0 || !environments.every((e) => PROJECT.test(e))) {
    throw new TypeError('flag-webhooks/emulator: option "environments" must be a non-empty list of keys');
  }
  if (options.token !== undefined && (typeof options.token !== "string" || !isToken(options.token))) {
    throw new TypeError(
      'flag-webhooks/emulator: option "token" must be 8 to 200 visible ASCII characters, without spaces (it is sent as Authorization: Bearer <token>)',
    );
  }
  const maxDeliveries = options.maxDeliveries ?? 1000;
  if (!Number.isSafeInteger(maxDeliveries) || maxDeliveries < 1) {
    throw new TypeError('flag-webhooks/emulator: option "maxDeliveries" must be a positive integer');
  }
  return { environments: [...environments], maxDeliveries };
}

/** Every address of this machine, as a URL host. Node gives each IPv6 one without a %zone. */
function machineHosts(): string[] {
  // networkInterfaces() gives a list for every interface it names.
  const interfaces = Object.values(networkInterfaces()) as NetworkInterfaceInfo[][];
  return interfaces.flat().map(({ address }) => hostOfAddress(address) as string);
}

/** The observer when no `onDelivery` is given. */
function ignore(): void {}
