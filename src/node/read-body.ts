import type { IncomingMessage } from "node:http";
import { WebhookError } from "../errors.js";
import { payloadTooLarge } from "../receiver.js";

/**
 * Reads a Node request's raw body, at most `limit` bytes. Refuses at once when Content-Length
 * announces more, and otherwise counts the bytes that really arrive (a chunked body has no
 * Content-Length, and a client can announce less than it sends): at the first byte over the
 * limit it stops reading and pauses the stream instead of buffering the rest.
 * Uses only the stream's events, so it needs no `node:*` import.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Uint8Array> {
  const announced = req.headers["content-length"];
  if (announced !== undefined && Number(announced) > limit) return Promise.reject(payloadTooLarge(limit));

  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    let received = 0;

    function onData(chunk: Uint8Array): void {
      received += chunk.byteLength;
      if (received > limit) {
        finish();
        req.pause();
        reject(payloadTooLarge(limit));
        return;
      }
      chunks.push(chunk);
    }
    function onEnd(): void {
      finish();
      resolve(chunks.length === 1 ? (chunks[0] as Uint8Array) : concat(chunks, received));
    }
    function onError(cause?: unknown): void {
      finish();
      reject(new WebhookError("invalid_payload", "the request body was not fully received", { cause }));
    }
    function finish(): void {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("aborted", onError);
      req.off("close", onClose);
    }
    function onClose(): void {
      // 'close' before 'end' means the client went away mid-body.
      if (!req.complete) onError();
    }

    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("aborted", onError);
    req.on("close", onClose);
  });
}

function concat(chunks: Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
