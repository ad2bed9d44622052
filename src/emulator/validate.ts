import { isFiniteNumber } from "../util/finite.js";
import { ApiError } from "./api-error.js";
import { EVENT_TYPES, type EventType, type FlagType } from "./store.js";

// Field checks of the emulated API. Each failure is a 400 invalid_request whose message names the field.

export type Body = Record<string, unknown>;

export function invalid(message: string): ApiError {
  return new ApiError(400, "invalid_request", message);
}

/** Refuses fields the endpoint does not take, so a typo (`enabled` for `on`) is an error, not a silent no-op. */
export function onlyFields(body: Body, allowed: readonly string[]): void {
  for (const field of Object.keys(body)) {
    if (!allowed.includes(field))
      throw invalid(`${field} is not a field of this request (allowed: ${allowed.join(", ")})`);
  }
}

/**
 * A project id or an environment key: 1 to 100 letters, digits, dots, dashes or underscores,
 * starting with a letter or digit.
 */
export const PROJECT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

const KEY = /^[a-z0-9-]+$/;
export const KEY_MAX = 100;
const TYPES: readonly FlagType[] = ["boolean", "string", "number", "json"];

export function createFlagInput(body: Body): { key: string; type: FlagType; variations: unknown[]; tags: string[] } {
  onlyFields(body, ["key", "type", "variations", "tags"]);
  const { key, type, variations, tags } = body;
  if (typeof key !== "string") throw invalid("key is required and must be a string");
  if (!KEY.test(key)) throw invalid("key must contain only lowercase letters, digits and dashes");
  if (key.length > KEY_MAX) throw invalid(`key must be at most ${KEY_MAX} characters`);
  if (typeof type !== "string" || !TYPES.includes(type as FlagType)) {
    throw invalid(`type is required and must be one of ${TYPES.join(", ")}`);
  }
  return {
    key,
    type: type as FlagType,
    variations: flagVariations(type as FlagType, variations),
    tags: stringList(tags, "tags") ?? [],
  };
}

function flagVariations(type: FlagType, variations: unknown): unknown[] {
  if (type === "boolean") {
    // Spec section 2: boolean flags have the two values true, false (in that order).
    if (variations === undefined) return [true, false];
    if (JSON.stringify(variations) !== "[true,false]")
      throw invalid("variations of a boolean flag must be [true, false]");
    return [true, false];
  }
  if (variations === undefined) throw invalid(`variations is required for a ${type} flag`);
  if (!Array.isArray(variations) || variations.length < 2) {
    throw invalid("variations must be an array of at least two values");
  }
  variations.forEach((value, i) => {
    if (type === "string" && typeof value !== "string") throw invalid(`variations[${i}] must be a string`);
    if (type === "number" && !isFiniteNumber(value)) {
      throw invalid(`variations[${i}] must be a number`);
    }
  });
  const seen = new Set(variations.map((value) => JSON.stringify(value)));
  if (seen.size !== variations.length) throw invalid("variations must be distinct");
  return variations;
}

function stringList(value: unknown, field: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw invalid(`${field} must be an array of strings`);
  value.forEach((item, i) => {
    if (typeof item !== "string" || item === "") throw invalid(`${field}[${i}] must be a non-empty string`);
  });
  return value as string[];
}

export function updateFlagInput(body: Body): { environment: string; on?: boolean; percent?: number; comment?: string } {
  onlyFields(body, ["environment", "on", "rollout", "comment"]);
  const { environment, on, rollout, comment } = body;
  if (typeof environment !== "string" || environment === "") {
    throw invalid("environment is required and must be a string");
  }
  if (on !== undefined && typeof on !== "boolean") throw invalid("on must be a boolean");
  let percent: number | undefined;
  if (rollout !== undefined) {
    if (typeof rollout !== "object" || rollout === null || Array.isArray(rollout)) {
      throw invalid("rollout must be an object with the field percent");
    }
    onlyFields(rollout as Body, ["percent"]);
    percent = rolloutPercent((rollout as Body).percent, "rollout.percent");
  }
  if (comment !== undefined && typeof comment !== "string") throw invalid("comment must be a string");
  return {
    environment,
    ...(on !== undefined ? { on } : {}),
    ...(percent !== undefined ? { percent } : {}),
    ...(comment ? { comment } : {}),
  };
}

export function rolloutPercent(value: unknown, field: string): number {
  if (!isFiniteNumber(value) || value < 0 || value > 100) {
    throw invalid(`${field} must be a number from 0 to 100`);
  }
  return value;
}

/**
 * A `Host` header value (or a bind address) as the WHATWG URL parser reads it: `127.1`,
 * `0x7f.0.0.1` and `127.0.0.1` are one host, and so are `[0:0:0:0:0:0:0:1]` and `[::1]`.
 * Undefined when it is not a host at all. `port` is "" when none is given.
 */
export function parseHost(value: string | undefined): { hostname: string; port: string } | undefined {
  // No Host header at all (HTTP/1.0 allows that) is no host.
  if (!value || /[\s/\\?#@]/.test(value)) return undefined;
  try {
    const url = new URL(`http://${value}`);
    return { hostname: url.hostname, port: url.port };
  } catch {
    return undefined;
  }
}

/** An address or name for listening, as a URL host: IPv6 in brackets, IPv4 in dotted decimal. */
export function hostOfAddress(address: string): string | undefined {
  const bracketed = address.includes(":") && !address.startsWith("[") ? `[${address}]` : address;
  return parseHost(bracketed)?.hostname;
}

/**
 * Whether a URL hostname (as `new URL().hostname` gives it, so already in one spelling) names
 * this machine's loopback interface: `localhost`, `127.0.0.0/8`, `[::1]`, or IPv4 loopback mapped
 * to IPv6 (`[::ffff:7f00:1]`).
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostOfAddress(hostname);
  if (host === undefined) return false;
  return (
    host === "localhost" ||
    /^127\.\d+\.\d+\.\d+$/.test(host) ||
    host === "[::1]" ||
    /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(host)
  );
}

export function createWebhookInput(
  body: Body,
  environments: readonly string[],
): { url: string; events: EventType[]; environments?: string[] } {
  onlyFields(body, ["url", "events", "environments"]);
  const { url, events, environments: only } = body;
  if (typeof url !== "string") throw invalid("url is required and must be a string");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid("url must be an absolute URL");
  }
  // The service posts to HTTPS endpoints (spec section 2); plain HTTP is allowed only to this machine, for development.
  if (!(parsed.protocol === "https:" || (parsed.protocol === "http:" && isLoopbackHost(parsed.hostname)))) {
    throw invalid("url must be an https:// URL (http:// is accepted for localhost and 127.0.0.1 only)");
  }
  if (parsed.username || parsed.password) throw invalid("url must not contain credentials");
  if (!Array.isArray(events) || events.length === 0) {
    throw invalid(`events is required: a non-empty array of ${EVENT_TYPES.join(", ")}`);
  }
  events.forEach((type, i) => {
    if (!EVENT_TYPES.includes(type)) throw invalid(`events[${i}] must be one of ${EVENT_TYPES.join(", ")}`);
  });
  if (new Set(events).size !== events.length) throw invalid("events must be distinct");
  const list = stringList(only, "environments");
  if (list !== undefined) {
    if (list.length === 0) throw invalid("environments must not be empty (omit it for every environment)");
    list.forEach((env, i) => {
      if (!environments.includes(env))
        throw invalid(`environments[${i}] "${env}" is not an environment of this project`);
    });
  }
  return { url: parsed.href, events: events as EventType[], ...(list ? { environments: list } : {}) };
}

export interface ListQuery {
  tag?: string;
  stale: boolean;
  limit: number;
  after?: number;
}

export function listQuery(search: URLSearchParams): ListQuery {
  const allowed = ["tag", "stale", "limit", "cursor"];
  for (const name of new Set(search.keys())) {
    if (!allowed.includes(name))
      throw invalid(`${name} is not a query parameter of this request (allowed: ${allowed.join(", ")})`);
    if (search.getAll(name).length > 1) throw invalid(`${name} must be given once`);
  }
  const query: ListQuery = { stale: false, limit: 20 };
  const tag = search.get("tag");
  if (tag !== null) {
    if (tag === "") throw invalid("tag must not be empty");
    query.tag = tag;
  }
  const stale = search.get("stale");
  if (stale !== null) {
    if (stale !== "true" && stale !== "false") throw invalid("stale must be true or false");
    query.stale = stale === "true";
  }
  const limit = search.get("limit");
  if (limit !== null) {
    if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > 100) {
      throw invalid("limit must be an integer from 1 to 100");
    }
    query.limit = Number(limit);
  }
  const cursor = search.get("cursor");
  if (cursor !== null) query.after = decodeCursor(cursor);
  return query;
}

/** Cursors are opaque to clients: the creation order of the last flag of the page, base64url-encoded. */
export function encodeCursor(seq: number): string {
  return Buffer.from(`flags:${seq}`).toString("base64url");
}

function decodeCursor(cursor: string): number {
  const match = /^flags:([1-9]\d{0,15})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!match || encodeCursor(Number(match[1])) !== cursor) {
    throw invalid("cursor is not a cursor from a previous response");
  }
  return Number(match[1]);
}
