import type { ServerResponse } from "node:http";
import type { Accepted } from "../receiver.js";

/**
 * Settles a claimed delivery with the answer Node actually sends on `res`, whoever writes it
 * (the core, the handler, the framework's error handler) and whenever (after the middleware
 * returned: Koa, a hijacked Fastify reply): the status of the head on the wire once `res.end()`
 * returned, or a failure when the answer is cut with `res.destroy()`. Not on the response's
 * `close`: a client that hangs up closes it while the handler still works, and releasing the
 * claim then let the sender's retry run the handler a second time, concurrently (issue 15).
 * An answer that is never ended holds the claim until its lease runs out.
 */
export function settleOnAnswer(res: ServerResponse, accepted: Accepted): void {
  const { end, destroy, writeHead } = res;
  // The status on the wire is the one of the head: Node writes it at the first write or end
  // (through writeHead), and a status set after that is never sent.
  let sent: number | undefined;
  res.writeHead = function writeHead_(this: ServerResponse, ...args: unknown[]) {
    const result = (writeHead as (...args: unknown[]) => ServerResponse).apply(this, args);
    sent ??= res.statusCode;
    return result;
  } as ServerResponse["writeHead"];
  const restore = () => {
    res.end = end;
    res.destroy = destroy;
    res.writeHead = writeHead;
  };
  res.end = function end_(this: ServerResponse, ...args: unknown[]) {
    // An end that throws (a body Node refuses) sent nothing: the answer the error handler writes
    // next is the one that counts, so the wrapper stays until an end returns.
    const result = (end as (...args: unknown[]) => ServerResponse).apply(this, args);
    restore();
    void accepted.settle(sent ?? res.statusCode);
    return result;
  } as ServerResponse["end"];
  res.destroy = function destroy_(this: ServerResponse, error?: Error) {
    restore();
    void accepted.settle(undefined, error);
    return destroy.call(this, error);
  };
}
