import type { Answer } from "../receiver.js";

/** The core's answer as a fetch Response, for every adapter built on fetch's Request/Response. */
export function toResponse(answer: Answer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
