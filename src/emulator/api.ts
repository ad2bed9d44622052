// The emulator's endpoints: the service's `/v2` API (flags and webhooks, as the interface
// document has them) and the emulator's own under `/_emulator` (state for the page, rollout
// events, redelivery). Requests reach them authorized (see routes.ts).
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError } from "./api-error.js";
import type { Sender } from "./deliveries.js";
import { readJson, sendJson, sendNoContent } from "./http.js";
import { EVENT_TYPES, type Flag, type Store } from "./store.js";
import {
  createFlagInput,
  createWebhookInput,
  encodeCursor,
  invalid,
  listQuery,
  onlyFields,
  PROJECT,
  rolloutPercent,
  updateFlagInput,
} from "./validate.js";

/** What the endpoints work on. */
export interface ApiState {
  readonly store: Store;
  readonly sender: Sender;
  readonly environments: readonly string[];
  /** Called when projects or webhooks changed outside the store's own events: tells the page, saves. */
  stateChanged(): void;
}

/** The `/v2` API; `path` is what follows `/v2`. */
export async function serviceApi(
  state: ApiState,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  search: URLSearchParams,
): Promise<void> {
  const route = /^\/projects\/([^/]+)\/(flags|webhooks)(?:\/([^/]+))?$/.exec(path);
  if (!route) throw new ApiError(404, "not_found", `no endpoint at ${path || "/"}`);
  const project = segment(route[1] as string, "project");
  if (!PROJECT.test(project)) {
    throw invalid(
      "project must be 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit",
    );
  }
  const isFlags = route[2] === "flags";
  const call: Call = { req, res, method: methodOf(req), project, search };
  if (route[3] === undefined) return isFlags ? flags(state, call) : webhooks(state, call);
  const id = segment(route[3], isFlags ? "key" : "id");
  return isFlags ? flag(state, call, id) : webhook(state, call, id);
}

/** One request to one endpoint of the `/v2` API. */
interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  project: string;
  search: URLSearchParams;
}

/** `/projects/{project}/flags`: list, create. */
async function flags({ store }: ApiState, { req, res, method, project, search }: Call): Promise<void> {
  if (method === "GET") {
    const page = store.list(project, listQuery(search));
    return sendJson(res, 200, { data: page.flags, ...(page.next ? { next: encodeCursor(page.next) } : {}) });
  }
  if (method === "POST") {
    const input = createFlagInput(await readJson(req));
    return sendJson(res, 201, store.create(project, input));
  }
  throw notAllowed(method, "GET, POST");
}

/** `/projects/{project}/flags/{key}`: update, delete. */
async function flag({ store }: ApiState, { req, res, method, project }: Call, id: string): Promise<void> {
  if (method === "PATCH") {
    const body = await readJson(req);
    store.find(project, id);
    return sendJson(res, 200, store.update(project, id, updateFlagInput(body)));
  }
  if (method === "DELETE") {
    store.delete(project, id);
    return sendNoContent(res);
  }
  throw notAllowed(method, "PATCH, DELETE");
}

/** `/projects/{project}/webhooks`: register. */
async function webhooks(state: ApiState, { req, res, method, project }: Call): Promise<void> {
  if (method !== "POST") throw notAllowed(method, "POST");
  const input = createWebhookInput(await readJson(req), state.environments);
  const webhook = state.store.addWebhook(project, input);
  state.stateChanged();
  // Spec section 2: the secret is returned here and never again.
  const { createdAt: _, ...created } = webhook;
  return sendJson(res, 201, created);
}

/** `/projects/{project}/webhooks/{id}`: delete, which stops its deliveries at once. */
async function webhook(state: ApiState, { res, method, project }: Call, id: string): Promise<void> {
  if (method !== "DELETE") throw notAllowed(method, "DELETE");
  const removed = state.store.removeWebhook(project, id);
  state.sender.cancel(removed.id);
  state.stateChanged();
  return sendNoContent(res);
}

/** Endpoints of the emulator itself (not the service's); `path` is what follows `/_emulator`. */
export async function emulatorApi(
  state: ApiState,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
): Promise<void> {
  const method = methodOf(req);
  if (path === "/state" && method === "GET") return sendJson(res, 200, snapshot(state));
  // GET /events is the page's event stream, which routes.ts answers before this.
  if (path === "/state" || path === "/events") throw notAllowed(method, "GET");
  const rollout = /^\/projects\/([^/]+)\/flags\/([^/]+)\/(rollout-step|guard-triggered)$/.exec(path);
  const copy = /^\/deliveries\/([^/]+)\/(redeliver|tampered-copy)$/.exec(path);
  if (!rollout && !copy) throw new ApiError(404, "not_found", `no emulator endpoint at ${method} ${path}`);
  if (method !== "POST") throw notAllowed(method, "POST");
  // One of the two matched.
  return rollout ? rolloutEvent(state, req, res, rollout) : sendCopy(state, res, copy as RegExpExecArray);
}

/** A rollout step or a guard triggered: `flag.rollout_step` or `flag.guard_triggered`, as the service sends them. */
async function rolloutEvent(
  { store }: ApiState,
  req: IncomingMessage,
  res: ServerResponse,
  route: RegExpExecArray,
): Promise<void> {
  const project = segment(route[1] as string, "project");
  const key = segment(route[2] as string, "key");
  const body = await readJson(req);
  store.find(project, key);
  const environment = body.environment;
  if (typeof environment !== "string") throw invalid("environment is required and must be a string");
  if (route[3] === "rollout-step") {
    onlyFields(body, ["environment", "percent"]);
    const percent = rolloutPercent(body.percent, "percent");
    return sendJson(res, 200, store.rolloutStep(project, key, environment, percent));
  }
  onlyFields(body, ["environment", "action"]);
  if (body.action !== "paused" && body.action !== "rolled_back") throw invalid("action must be paused or rolled_back");
  return sendJson(res, 200, store.guardTriggered(project, key, environment, body.action));
}

/** A redelivery (as it was) or a tampered copy (body changed, signature kept) of an earlier delivery. */
function sendCopy({ store, sender }: ApiState, res: ServerResponse, route: RegExpExecArray): void {
  const original = sender.deliveries.get(segment(route[1] as string, "id"));
  if (!original) throw new ApiError(404, "not_found", "no such delivery");
  const webhook = store.projects.get(original.project)?.webhooks.get(original.webhookId);
  if (!webhook) throw new ApiError(409, "webhook_deleted", "the delivery's webhook was deleted");
  const delivery = sender.copy(original, route[2] === "redeliver" ? "redelivery" : "tampered");
  sendJson(res, 202, delivery);
}

/** Everything the page shows, at once: it then follows the event stream. */
function snapshot(state: ApiState) {
  return {
    environments: state.environments,
    eventTypes: EVENT_TYPES,
    retry: state.sender.policy,
    projects: projectsView(state.store),
    deliveries: [...state.sender.deliveries.values()],
  };
}

/** Projects for the page: flags newest first, webhooks without their secrets. */
export function projectsView(store: Store) {
  return [...store.projects.values()].map((project) => ({
    id: project.id,
    flags: [...project.flags.values()].sort((a, b) => b.seq - a.seq).map((f): Flag => f.flag),
    webhooks: [...project.webhooks.values()].map(({ secret: _, ...webhook }) => webhook),
  }));
}

function notAllowed(method: string, methods: string): ApiError {
  return new ApiError(405, "method_not_allowed", `${method} is not allowed here (allowed: ${methods})`, {
    allow: methods,
  });
}

/** The method of a request: node:http sets it on every request a server receives. */
function methodOf(req: IncomingMessage): string {
  return req.method as string;
}

/** A path segment, percent-decoded; a malformed escape is the client's mistake (400). */
function segment(raw: string, name: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw invalid(`${name} in the path is not valid percent-encoding`);
  }
}
