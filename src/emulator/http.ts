import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError } from "./api-error.js";
import type { Body } from "./validate.js";

const BODY_LIMIT = 1024 * 1024;

/** Reads a JSON object body: Content-Type application/json (spec section 4), at most 1 MiB. */
export async function readJson(req: IncomingMessage): Promise<Body> {
  const type = req.headers["content-type"]?.split(";")[0];
  if (type?.trim().toLowerCase() !== "application/json") {
    throw new ApiError(415, "unsupported_media_type", "requests with a body must have Content-Type: application/json");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > BODY_LIMIT) throw new ApiError(413, "payload_too_large", "the request body is larger than 1 MiB");
    chunks.push(chunk);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new ApiError(400, "invalid_request", "the request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ApiError(400, "invalid_request", "the request body must be a JSON object");
  }
  return value as Body;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    ...headers,
  });
  res.end(body);
}

export function sendNoContent(res: ServerResponse): void {
  res.writeHead(204, { "cache-control": "no-store" });
  res.end();
}

/**
 * Spec section 7's error shape, for our ApiError; anything else is a 500 that says nothing of its
 * cause. An error after the headers went out (none does today: every answer writes them last)
 * can only end the connection.
 */
export function sendError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (error instanceof ApiError) {
    sendJson(res, error.status, { error: { code: error.code, message: error.message } }, error.headers);
  } else {
    sendJson(res, 500, { error: { code: "internal_error", message: "the emulator failed to handle this request" } });
  }
}
