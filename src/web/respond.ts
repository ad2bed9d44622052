import type { Answer, NativeReply } from "../receiver/protocol.js";

/** The core's answer as a fetch Response, for every adapter built on fetch's Request/Response. */
export function toResponse(answer: Answer): Response {
  // A server that honours it (@hono/node-server, Bun) stops reading an unsigned or oversized body;
  // runtimes that own the connection (Workers, Deno) ignore it.
  const headers = answer.close ? { ...answer.headers, connection: "close" } : answer.headers;
  return new Response(answer.body, { status: answer.status, headers });
}

/** What `receiver.handle` gave, as the Response to return: the handler's own, or the core's. */
export function handledResponse(answer: Answer | NativeReply): Response {
  return "native" in answer ? (answer.native as Response) : toResponse(answer);
}

/** The status of a `Response` that `onEvent` returned, which the adapter answers with as it is. */
export function responseStatus(value: unknown): number | undefined {
  return value instanceof Response ? value.status : undefined;
}
