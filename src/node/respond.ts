import type { ServerResponse } from "node:http";
import { errorResponse } from "../receiver.js";

/** Writes the core's error answer with Node's own response API, so it serves any Node stack. */
export function sendError(res: ServerResponse, error: unknown): void {
  const answer = errorResponse(error);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  if (answer.close) res.setHeader("connection", "close");
  res.end(answer.body);
}
