import type { IncomingMessage } from "node:http";
import { WebhookError } from "../errors.js";
import { joinChunks } from "../payload.js";
import { payloadTooLarge } from "../receiver.js";

/**
 * Reads a Node request's raw body, at most `limit` bytes, for at most `timeout` ms. Refuses at
 * once when Content-Length announces more, and otherwise counts the bytes that really arrive (a
 * chunked body has no Content-Length, and a client can announce less than it sends): at the
 * first byte over the limit it stops reading and pauses the stream instead of buffering the rest.
 * A body that stops arriving is refused with `body_timeout` when the time is up, instead of
 * holding the socket until Node's own request timeout (five minutes by default).
 * Uses only the stream's events, so it needs no `node:*` import.
 */
export function readBody(req: IncomingMessage, limit: number, timeout: number): Promise<Uint8Array> {
  // An absent Content-Length is NaN here, which is never over the limit.
  if (Number(req.headers["content-length"]) > limit) return Promise.reject(payloadTooLarge(limit));

  // The handlers stay attached once the promise is settled: a settled promise ignores further
  // calls, and a chunk past the limit is dropped, never kept.
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    let received = 0;
    const fail = (error: WebhookError) => {
      clearTimeout(timer);
      req.pause();
      reject(error);
    };
    const timer = setTimeout(
      () => fail(new WebhookError("body_timeout", `the request body did not arrive within ${timeout} ms`)),
      timeout,
    );
    req.on("data", (chunk: Uint8Array) => {
      received += chunk.byteLength;
      if (received <= limit) chunks.push(chunk);
      else fail(payloadTooLarge(limit));
    });
    req.on("end", () => {
      clearTimeout(timer);
      resolve(joinChunks(chunks, received));
    });
    const incomplete = (cause?: unknown) =>
      fail(new WebhookError("invalid_payload", "the request body was not fully received", { cause }));
    req.on("error", incomplete);
    // 'close' before the body is complete means the client went away mid-body.
    req.on("close", () => {
      if (!req.complete) incomplete();
    });
  });
}
