import { randomBytes } from "node:crypto";
import type { Actor } from "../events.js";
import { ApiError } from "./api-error.js";

/** A flag's state in one environment (spec section 2, "Environment state"). */
export interface EnvironmentState {
  on: boolean;
  /** Absent until a rollout percentage is set for the environment. */
  rollout?: { percent: number };
}

/** A flag as the API returns it (spec section 2, "Flag"). */
export interface Flag {
  key: string;
  name: string;
  type: FlagType;
  variations: unknown[];
  permanent: boolean;
  tags: string[];
  environments: Record<string, EnvironmentState>;
  createdAt: string;
}

export type FlagType = "boolean" | "string" | "number" | "json";

export const EVENT_TYPES = [
  "flag.created",
  "flag.updated",
  "flag.deleted",
  "rollout.step",
  "rollout.guard_triggered",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** A registered webhook, secret included: only the store and the sender ever see the secret. */
export interface StoredWebhook {
  id: string;
  url: string;
  events: EventType[];
  /** Absent means every environment (spec section 2, "Webhook"). */
  environments?: string[];
  secret: string;
  createdAt: string;
}

export interface StoredFlag {
  flag: Flag;
  /** Creation order, the tie-breaker of "newest first" and what a cursor points at. */
  seq: number;
  /** Last change in any environment; a flag unchanged for `staleAfterDays` is stale. */
  updatedAt: string;
}

export interface Project {
  id: string;
  flags: Map<string, StoredFlag>;
  webhooks: Map<string, StoredWebhook>;
}

/** Something that happened in a project, to be turned into one signed delivery per subscriber. */
export interface Happening {
  project: string;
  type: EventType;
  environment: string;
  data: Record<string, unknown>;
}

export interface StoreOptions {
  environments: string[];
  /** Where an update must carry a comment; none when not given. */
  protectedEnvironments?: readonly string[] | undefined;
  actor: Actor;
  staleAfterDays: number;
  now: () => Date;
}

export interface Change {
  environment: string;
  on?: boolean;
  percent?: number;
  comment?: string;
}

/** The emulated service's state: projects, their flags and webhooks, and every transition of spec section 3. */
export class Store {
  readonly projects = new Map<string, Project>();
  seq = 0;

  constructor(
    readonly options: StoreOptions,
    private readonly emit: (happenings: Happening[]) => void,
  ) {}

  /** Projects are created on first use of their id (the spec does not show how they are made). */
  project(id: string): Project {
    let project = this.projects.get(id);
    if (!project) {
      project = { id, flags: new Map(), webhooks: new Map() };
      this.projects.set(id, project);
    }
    return project;
  }

  private now(): string {
    return this.options.now().toISOString();
  }

  /** Flags newest first, filtered; `after` is the seq of the last flag of the previous page. */
  list(projectId: string, filter: { tag?: string; stale?: boolean; limit: number; after?: number }) {
    const staleBefore = this.options.now().getTime() - this.options.staleAfterDays * 86_400_000;
    const all = [...this.project(projectId).flags.values()]
      .filter((f) => filter.after === undefined || f.seq < filter.after)
      .filter((f) => filter.tag === undefined || f.flag.tags.includes(filter.tag))
      .filter((f) => !filter.stale || (!f.flag.permanent && Date.parse(f.updatedAt) <= staleBefore))
      .sort((a, b) => b.seq - a.seq);
    const page = all.slice(0, filter.limit);
    const last = page.at(-1);
    return { flags: page.map((f) => f.flag), next: all.length > page.length && last ? last.seq : undefined };
  }

  create(projectId: string, input: { key: string; type: FlagType; variations: unknown[]; tags: string[] }): Flag {
    const project = this.project(projectId);
    if (project.flags.has(input.key)) {
      throw new ApiError(409, "flag_exists", `a flag with the key "${input.key}" already exists in this project`);
    }
    const createdAt = this.now();
    // Spec section 3: a new flag is switched off in every environment (its sample says otherwise; the statement rules).
    // No prototype: the keys are the configured environments and nothing inherited.
    const environments: Record<string, EnvironmentState> = Object.create(null);
    for (const env of this.options.environments) environments[env] = { on: false };
    const flag: Flag = {
      key: input.key,
      name: input.key,
      type: input.type,
      variations: input.variations,
      permanent: false,
      tags: input.tags,
      environments,
      createdAt,
    };
    project.flags.set(flag.key, { flag, seq: ++this.seq, updatedAt: createdAt });
    this.emit(
      this.options.environments.map((environment) => ({
        project: projectId,
        type: "flag.created",
        environment,
        data: { flag: flag.key, actor: this.options.actor },
      })),
    );
    return flag;
  }

  find(projectId: string, key: string): StoredFlag {
    const stored = this.project(projectId).flags.get(key);
    if (!stored) throw new ApiError(404, "not_found", `no flag with the key "${key}" in this project`);
    return stored;
  }

  /** Spec section 3: one environment changes; omitted fields and other environments stay as they were. */
  update(projectId: string, key: string, change: Change): Flag {
    const stored = this.find(projectId, key);
    const state = this.environment(stored, change.environment);
    if (this.options.protectedEnvironments?.includes(change.environment) && !change.comment) {
      throw new ApiError(
        400,
        "comment_required",
        `comment is required to change a flag in the protected environment "${change.environment}"`,
      );
    }
    const changes: { path: string; from: unknown; to: unknown }[] = [];
    if (change.on !== undefined && change.on !== state.on) {
      changes.push({ path: "on", from: state.on, to: change.on });
      state.on = change.on;
    }
    if (change.percent !== undefined && change.percent !== state.rollout?.percent) {
      changes.push({ path: "rollout.percent", from: state.rollout?.percent ?? null, to: change.percent });
      state.rollout = { percent: change.percent };
    }
    // A request that changes nothing is answered with the flag and sends no event: nothing happened.
    if (changes.length > 0) {
      stored.updatedAt = this.now();
      const data: Record<string, unknown> = { flag: key, changes, actor: this.options.actor };
      if (change.comment) data.comment = change.comment;
      this.emit([{ project: projectId, type: "flag.updated", environment: change.environment, data }]);
    }
    return stored.flag;
  }

  delete(projectId: string, key: string): void {
    this.find(projectId, key);
    this.project(projectId).flags.delete(key);
    this.emit(
      this.options.environments.map((environment) => ({
        project: projectId,
        type: "flag.deleted",
        environment,
        data: { flag: key, actor: this.options.actor },
      })),
    );
  }

  /** Emulator-only: a scheduled rollout advanced to `percent` in one environment. */
  rolloutStep(projectId: string, key: string, environment: string, percent: number): Flag {
    const stored = this.find(projectId, key);
    const state = this.environment(stored, environment);
    const from = state.rollout?.percent ?? null;
    state.rollout = { percent };
    stored.updatedAt = this.now();
    this.emit([
      { project: projectId, type: "rollout.step", environment, data: { flag: key, rollout: { from, to: percent } } },
    ]);
    return stored.flag;
  }

  /** Emulator-only: a guard paused the rollout (percent kept) or rolled it back (percent 0). */
  guardTriggered(projectId: string, key: string, environment: string, action: "paused" | "rolled_back"): Flag {
    const stored = this.find(projectId, key);
    const state = this.environment(stored, environment);
    const from = state.rollout?.percent ?? null;
    const to = action === "rolled_back" ? 0 : from;
    if (action === "rolled_back") state.rollout = { percent: 0 };
    stored.updatedAt = this.now();
    this.emit([
      {
        project: projectId,
        type: "rollout.guard_triggered",
        environment,
        data: { flag: key, action, rollout: { from, to } },
      },
    ]);
    return stored.flag;
  }

  /**
   * The flag's state in one of the configured environments. A name from a request never indexes
   * the object unchecked: `__proto__`, `constructor` or `toString` would reach Object.prototype.
   */
  private environment(stored: StoredFlag, environment: string): EnvironmentState {
    const environments = stored.flag.environments;
    if (!this.options.environments.includes(environment) || !Object.hasOwn(environments, environment)) {
      throw new ApiError(400, "invalid_request", `environment "${environment}" is not an environment of this project`);
    }
    return environments[environment] as EnvironmentState;
  }

  addWebhook(projectId: string, input: { url: string; events: EventType[]; environments?: string[] }): StoredWebhook {
    const webhook: StoredWebhook = {
      id: `wh_${randomBytes(8).toString("hex")}`,
      url: input.url,
      events: input.events,
      ...(input.environments ? { environments: input.environments } : {}),
      secret: `whsec_${randomBytes(24).toString("hex")}`,
      createdAt: this.now(),
    };
    this.project(projectId).webhooks.set(webhook.id, webhook);
    return webhook;
  }

  removeWebhook(projectId: string, id: string): StoredWebhook {
    const project = this.project(projectId);
    const webhook = project.webhooks.get(id);
    if (!webhook) throw new ApiError(404, "not_found", `no webhook with the id "${id}" in this project`);
    project.webhooks.delete(id);
    return webhook;
  }

  /** Webhooks of the project subscribed to the type, limited to their environments when set (spec section 6). */
  subscribers(happening: Happening): StoredWebhook[] {
    return [...this.project(happening.project).webhooks.values()].filter(
      (w) => w.events.includes(happening.type) && (!w.environments || w.environments.includes(happening.environment)),
    );
  }
}
