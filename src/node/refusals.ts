import type { ServerResponse } from "node:http";

// Node's refusals on a response (a chunk or a reason it cannot send, a head already sent, a write
// after end), made where Node would make them, for a held answer (node/watch-answer.ts): its
// calls reach Node only later, when the answer is released, and must fail now as Node's would.

type Args = unknown[];

/**
 * Node's own refusal of a write's chunk (a string or bytes, nothing else: null has a code of its
 * own), thrown where Node's write throws it, since a held call reaches Node later.
 */
export function checkChunk(chunk: unknown): void {
  if (typeof chunk === "string" || chunk instanceof Uint8Array) return;
  if (chunk === null) {
    throw Object.assign(new TypeError("May not write null values to stream"), { code: "ERR_STREAM_NULL_VALUES" });
  }
  throw Object.assign(
    new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array'),
    { code: "ERR_INVALID_ARG_TYPE" },
  );
}

/**
 * The chunk an `end()` writes, read from its arguments as Node's end reads them: none when the
 * first is its callback or is falsy (Node's end writes nothing for `false`, `0` or `null`).
 */
export function endChunk(args: Args): unknown {
  const [chunk] = args;
  return chunk && typeof chunk !== "function" ? chunk : undefined;
}

/** The chunk of an `end()`, refused as Node's end refuses it: as a write's, when it writes one. */
export function checkEnd(args: Args): void {
  const chunk = endChunk(args);
  if (chunk !== undefined) checkChunk(chunk);
}

/**
 * The reason of a head Node would refuse (a character HTTP cannot carry), thrown where Node's
 * writeHead would throw it, since a held head reaches Node later. Read as Node reads it, as text:
 * a `statusMessage` that is no string is checked by what it reads as (none reads "undefined",
 * which passes). By hand, as checkChunk, so that the Node adapters import no built-in.
 */
export function checkReason(reason: unknown): void {
  if (/[^\t\x20-\x7e\x80-\xff]/.test(String(reason))) {
    throw Object.assign(new TypeError("Invalid character in statusMessage"), { code: "ERR_INVALID_CHAR" });
  }
}

/** Node's refusal of a change to a head already sent (`verb`: set, append, remove, write). */
export function headersSent(verb: string): Error {
  return Object.assign(new Error(`Cannot ${verb} headers after they are sent to the client`), {
    code: "ERR_HTTP_HEADERS_SENT",
  });
}

/**
 * A write to a held answer that was already ended, refused as Node refuses a write after end: it
 * returns false, and the error reaches the write's callback and the response's "error" listeners
 * (never the body of the answer, which was complete when it was ended).
 */
export function writeAfterEnd(res: ServerResponse, args: Args): boolean {
  const callback = callbackOf(args) as ((error: Error) => void) | undefined;
  const error = Object.assign(new Error("write after end"), { code: "ERR_STREAM_WRITE_AFTER_END" });
  queueMicrotask(() => {
    callback?.(error);
    res.emit("error", error);
  });
  return false;
}

/** `end()` again on a held answer already ended: nothing more, as on Node's (a chunk is a write after end). */
export function endAfterEnd(res: ServerResponse, args: Args): ServerResponse {
  if (endChunk(args) !== undefined) {
    writeAfterEnd(res, args);
    return res;
  }
  const callback = callbackOf(args) as (() => void) | undefined;
  if (callback) res.once("finish", callback);
  return res;
}

/** The callback of a write or end: its last argument, when that is a function. */
export function callbackOf(args: Args): unknown {
  const last = args[args.length - 1];
  return typeof last === "function" ? last : undefined;
}
