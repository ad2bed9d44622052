import type { ServerResponse } from "node:http";
import type { Answer } from "../receiver/protocol.js";

/** Writes the core's answer with Node's own response API, so it serves any Node stack. */
export function sendAnswer(res: ServerResponse, answer: Answer): void {
  if (res.headersSent) {
    // Something else began answering: the only honest thing left is to cut the connection.
    if (!res.writableEnded) res.destroy();
    return;
  }
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  if (answer.close) res.setHeader("connection", "close");
  res.end(answer.body ?? undefined);
}
