import type { ServerResponse } from "node:http";
import { isSuccess } from "../receiver/answers.js";
import type { Accepted, Answer } from "../receiver/protocol.js";

type Args = unknown[];

/**
 * Watches the answer Node sends on `res` for one accepted delivery, whoever writes it (the core,
 * the handler, the framework's error handler) and whenever (after the middleware returned: Koa,
 * a hijacked Fastify reply), and tells the receiver its status once it is final: when `end()` is
 * called, when the answer is cut with `res.destroy()`, or when the connection closes after the
 * answer began. A client that hangs up before anything was written changes nothing: the handler
 * still works, and its claim must stand until it answers.
 *
 * While the delivery holds a claim, or a store that holds its effects, a 2xx answer is held back
 * (its head, writes and end kept in memory, the response looking sent to the code that wrote it)
 * until the receiver has decided and the store has recorded the event; then it is written as it
 * was, or replaced by the answer the receiver gives instead (a 503 when the commit failed, the
 * error's answer when the handler threw after it). Any other answer leaves at once.
 *
 * @param endsHandler whether the answer is also the only sign the handler finished (Express's
 *   route after the middleware), rather than something the adapter reports itself.
 */
export function watchAnswer(res: ServerResponse, accepted: Accepted, endsHandler: boolean): void {
  const { writeHead, write, end, destroy } = res;
  /** The status of the head, once fixed (written, or held). */
  let fixed: number | undefined;
  /** A 2xx answer is being held. */
  let holding = false;
  let head: Args | undefined;
  const writes: Args[] = [];
  /** The answer was reported to the receiver. */
  let over = false;

  const holds = (status: unknown): boolean => isSuccess(status as number) && accepted.holdsAnswer();
  const report = (status: number | undefined, error?: unknown): Promise<Answer | undefined> => {
    if (endsHandler) accepted.finished(error);
    return accepted.answered(status);
  };

  res.writeHead = function writeHead_(this: ServerResponse, ...args: Args) {
    if (holding) throw headersSent();
    if (!over && fixed === undefined && Number.isInteger(args[0]) && holds(args[0])) {
      holding = true;
      fixed = args[0] as number;
      head = args;
      looks(res, "headersSent");
      return this;
    }
    const result = (writeHead as (...args: Args) => ServerResponse).apply(this, args);
    fixed ??= res.statusCode;
    return result;
  } as ServerResponse["writeHead"];

  res.write = function write_(this: ServerResponse, ...args: Args) {
    const begins = !holding && !over && fixed === undefined && !res.headersSent && holds(res.statusCode);
    if (!holding && !begins) return (write as (...args: Args) => boolean).apply(this, args);
    // A chunk Node refuses throws before anything is held, as Node throws before it writes.
    checkChunk(args[0]);
    if (begins) {
      holding = true;
      fixed = res.statusCode;
      looks(res, "headersSent");
    }
    writes.push(args);
    return true;
  } as ServerResponse["write"];

  res.end = function end_(this: ServerResponse, ...args: Args) {
    if (over) return (end as (...args: Args) => ServerResponse).apply(this, args);
    if (!holding && fixed === undefined && !res.headersSent && holds(res.statusCode)) {
      checkChunk(args[0]);
      holding = true;
      fixed = res.statusCode;
    }
    if (!holding) {
      // An end that throws (a body Node refuses) sent nothing: the answer the error handler writes
      // next is the one that counts, so the wrapper stays until an end returns.
      const result = (end as (...args: Args) => ServerResponse).apply(this, args);
      over = true;
      restore();
      void report(fixed ?? res.statusCode);
      return result;
    }
    checkChunk(args[0]);
    over = true;
    looks(res, "headersSent");
    looks(res, "writableEnded");
    void report(fixed).then((instead) => release(args, instead));
    return this;
  } as ServerResponse["end"];

  res.destroy = function destroy_(this: ServerResponse, error?: Error) {
    if (!over) {
      over = true;
      restore();
      void report(undefined, error);
    }
    return destroy.call(this, error);
  };

  // The connection closed after the answer began but before it ended (Express's final handler
  // cuts the socket of a route that failed mid-answer): that answer is cut.
  const closed = () => {
    if (over || (!holding && !res.headersSent)) return;
    over = true;
    restore();
    void report(undefined);
  };
  res.once("close", closed);

  function restore(): void {
    res.writeHead = writeHead;
    res.write = write;
    res.end = end;
    res.destroy = destroy;
    res.off("close", closed);
    delete (res as { headersSent?: boolean }).headersSent;
    delete (res as { writableEnded?: boolean }).writableEnded;
  }

  /** Writes the held answer as it was, or the receiver's answer in its place. */
  function release(endArgs: Args, instead: Answer | undefined): void {
    restore();
    if (res.destroyed) return;
    try {
      if (instead) {
        res.statusCode = instead.status;
        for (const name of res.getHeaderNames()) res.removeHeader(name);
        for (const [name, value] of Object.entries(instead.headers)) res.setHeader(name, value);
        if (instead.close) res.setHeader("connection", "close");
        res.end(instead.body ?? undefined);
        return;
      }
      if (head) res.writeHead(...(head as Parameters<ServerResponse["writeHead"]>));
      else res.statusCode = fixed as number;
      for (const args of writes) (res.write as (...args: Args) => boolean)(...args);
      (res.end as (...args: Args) => ServerResponse)(...endArgs);
    } catch (error) {
      res.destroy(error as Error);
    }
  }
}

/** Makes `res` read as Node reads a response whose head (or end) went out, while it is held. */
function looks(res: ServerResponse, property: "headersSent" | "writableEnded"): void {
  Object.defineProperty(res, property, { configurable: true, get: () => true });
}

/** Node's own refusals, thrown where Node would throw them, since a held call reaches Node later. */
function checkChunk(chunk: unknown): void {
  if (chunk == null || typeof chunk === "string" || typeof chunk === "function" || chunk instanceof Uint8Array) return;
  throw Object.assign(
    new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array'),
    { code: "ERR_INVALID_ARG_TYPE" },
  );
}

function headersSent(): Error {
  return Object.assign(new Error("Cannot write headers after they are sent to the client"), {
    code: "ERR_HTTP_HEADERS_SENT",
  });
}
