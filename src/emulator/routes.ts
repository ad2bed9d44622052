// How a request reaches the emulator: the Host check (DNS rebinding), the Origin check (another
// site's page), the token, then the route: the `/v2` API, the emulator's own endpoints and event
// stream, or the page.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { type ApiState, emulatorApi, serviceApi } from "./api.js";
import { ApiError } from "./api-error.js";
import { pageFile, servePage } from "./page.js";
import type { EventStream } from "./stream.js";
import { isLoopbackHost, parseHost } from "./validate.js";

/** What a request needs of the running emulator. */
export interface Site extends ApiState {
  /** The API token: `Authorization: Bearer <token>`, or `?token=` for the event stream. */
  readonly token: string;
  /** The API's base URL, which the page shows. */
  readonly url: string;
  /** The port listened on, which `Host` must name. */
  readonly port: string;
  /** The hosts `Host` may name besides loopback: the addresses listened on. */
  readonly ownHosts: ReadonlySet<string>;
  readonly stream: EventStream;
}

/** Answers one request, or throws the ApiError to answer with. */
export async function handleRequest(site: Site, req: IncomingMessage, res: ServerResponse): Promise<void> {
  checkHost(site, req.headers.host);
  // node:http sets req.url on every request a server receives.
  const url = requestUrl(req.url as string);
  const path = url.pathname;
  const isApi = path === "/v2" || path.startsWith("/v2/");
  const isOwn = path.startsWith("/_emulator/");
  if (isApi || isOwn) checkOrigin(req);
  if (isApi) {
    authorize(site.token, bearerToken(req.headers.authorization));
    return serviceApi(site, req, res, path.slice(3), url.searchParams);
  }
  if (isOwn) {
    // An EventSource cannot send headers: the page's stream passes the token in the query.
    if (path === "/_emulator/events" && req.method === "GET") {
      authorize(site.token, url.searchParams.get("token"));
      return site.stream.open(req, res);
    }
    authorize(site.token, bearerToken(req.headers.authorization));
    return emulatorApi(site, req, res, path.slice("/_emulator".length));
  }
  const page = req.method === "GET" || req.method === "HEAD" ? pageFile(path) : undefined;
  if (page) return servePage(page, res, { url: site.url });
  throw new ApiError(404, "not_found", `nothing at ${req.method} ${path}`);
}

function requestUrl(target: string): URL {
  try {
    return new URL(target, "http://emulator.invalid");
  } catch {
    // A target such as `//[` that the URL parser cannot read is the client's mistake, not ours.
    throw new ApiError(400, "invalid_request", "the request target is not a valid URL");
  }
}

/**
 * DNS-rebinding guard: a web page whose name resolves to this machine sends its own name in
 * `Host`. Only names of loopback (`localhost`, `127.0.0.0/8`, `[::1]`, in any spelling) or of
 * the address listened on, with the port listened on, are answered, whatever the bind address.
 */
function checkHost(site: Site, header: string | undefined): void {
  const host = parseHost(header);
  const port = host?.port === "" ? "80" : host?.port;
  if (!host || port !== site.port || !(isLoopbackHost(host.hostname) || site.ownHosts.has(host.hostname))) {
    throw new ApiError(
      403,
      "forbidden",
      "the emulator answers only requests addressed to localhost, 127.0.0.1, [::1] or the address it listens on, with its port",
    );
  }
}

/** Browsers say where a request comes from: the API and the page's calls answer only this origin. */
function checkOrigin(req: IncomingMessage): void {
  const site = req.headers["sec-fetch-site"];
  const origin = req.headers.origin;
  const sameOrigin = origin === undefined || origin === `http://${req.headers.host}`;
  if ((site !== undefined && site !== "same-origin" && site !== "none") || !sameOrigin) {
    throw new ApiError(403, "forbidden", "the emulator answers no request made by another origin's page");
  }
}

/** The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive (RFC 9110 section 11.1). */
function bearerToken(header: string | undefined): string | undefined {
  return header?.match(/^Bearer +(\S+)$/i)?.[1];
}

function authorize(token: string, presented: string | null | undefined): void {
  // Compared as digests, in constant time, so neither the token's length nor its prefix leaks.
  const digest = (value: string) => createHash("sha256").update(value).digest();
  if (typeof presented !== "string" || !timingSafeEqual(digest(presented), digest(token))) {
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
