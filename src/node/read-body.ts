import type { IncomingMessage } from "node:http";
import { payloadTooLarge, WebhookError } from "../errors.js";
import { joinChunks } from "../payload.js";

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
      clock.bodies.delete(expire);
      req.pause();
      reject(error);
    };
    const expire = () => fail(new WebhookError("body_timeout", `the request body did not arrive within ${timeout} ms`));
    const clock = clockOf(timeout);
    clock.bodies.set(expire, performance.now() + timeout);
    if (!clock.timer) wake(clock, timeout);
    req.on("data", (chunk: Uint8Array) => {
      received += chunk.byteLength;
      if (received <= limit) chunks.push(chunk);
      else fail(payloadTooLarge(limit));
    });
    req.on("end", () => {
      clock.bodies.delete(expire);
      resolve(joinChunks(chunks, received));
    });
    const incomplete = (cause?: unknown) =>
      fail(new WebhookError("invalid_payload", "the request body was not fully received", { cause }));
    req.on("error", incomplete);
    // 'close' before the body is complete means the client went away mid-body.
    req.on("close", () => {
      // A complete request emits 'close' only after 'end', when the promise is settled already.
      // Stryker disable next-line ConditionalExpression: fail() after 'end' changes nothing seen
      if (!req.complete) incomplete();
    });
  });
}

/**
 * The bodies still arriving under one timeout (when each is due, by its expiry), and one timer
 * for all of them. A Map keeps insertion order, and with a single timeout that is the order the
 * bodies are due in, so the timer only ever waits for the oldest, and a finished body is one
 * delete. A timer per request cost more than the rest of reading a small body together
 * (bench/http.mjs measures this path); under steady traffic this sets a timer about once per
 * `timeout`. The timer is unreferenced: a body still arriving has its socket, which keeps the
 * process alive; the timer alone must not, once the last body is read.
 */
interface Clock {
  bodies: Map<() => void, number>;
  timer: ReturnType<typeof setTimeout> | undefined;
}

const clocks = new Map<number, Clock>();

function clockOf(timeout: number): Clock {
  let clock = clocks.get(timeout);
  if (!clock) {
    clock = { bodies: new Map(), timer: undefined };
    clocks.set(timeout, clock);
  }
  return clock;
}

function wake(clock: Clock, ms: number): void {
  clock.timer = setTimeout(() => {
    clock.timer = undefined;
    const now = performance.now();
    try {
      for (const [expire, due] of clock.bodies) {
        // Stryker disable next-line EqualityOperator: a body due at this very instant expires now or 1 ms later
        if (due > now) break;
        clock.bodies.delete(expire);
        expire();
      }
    } finally {
      // A timer may fire a little before performance.now() says the oldest is due: it waits again.
      const oldest = clock.bodies.values().next();
      if (!oldest.done && !clock.timer) wake(clock, Math.max(1, Math.ceil(oldest.value - performance.now())));
    }
  }, ms);
  // Stryker disable next-line OptionalChaining: Node's timers always have unref (other runtimes' may not)
  (clock.timer as { unref?: () => void }).unref?.();
}
