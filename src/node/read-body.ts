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
      deadlines.finish(deadline);
      req.pause();
      reject(error);
    };
    const deadlines = deadlinesOf(timeout);
    const deadline = deadlines.add(() =>
      fail(new WebhookError("body_timeout", `the request body did not arrive within ${timeout} ms`)),
    );
    req.on("data", (chunk: Uint8Array) => {
      received += chunk.byteLength;
      if (received <= limit) chunks.push(chunk);
      else fail(payloadTooLarge(limit));
    });
    req.on("end", () => {
      deadlines.finish(deadline);
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

/** A body still arriving: when it is due, and what to do then. A node of its list. */
interface Deadline {
  due: number;
  expire: () => void;
  previous: Deadline | undefined;
  next: Deadline | undefined;
  /** Out of the list: finished, or expired. */
  done: boolean;
}

/**
 * The bodies still arriving under one timeout, oldest first, and one timer for all of them.
 * With a single timeout the deadlines come in the order the bodies began, so the list is sorted
 * as it is appended to, a finished body is unlinked in O(1), and the timer only ever waits for
 * the oldest. A timer per request cost more than the rest of reading a small body together
 * (bench/http.mjs measures this path); this costs one small object per request, and a timer
 * call about once per `timeout` under steady traffic.
 */
class Deadlines {
  private first: Deadline | undefined;
  private last: Deadline | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly timeout: number) {}

  add(expire: () => void): Deadline {
    const deadline: Deadline = {
      due: performance.now() + this.timeout,
      expire,
      previous: this.last,
      next: undefined,
      done: false,
    };
    if (this.last) this.last.next = deadline;
    else this.first = deadline;
    this.last = deadline;
    if (!this.timer) this.wake(this.timeout);
    return deadline;
  }

  finish(deadline: Deadline): void {
    if (deadline.done) return;
    deadline.done = true;
    const { previous, next } = deadline;
    if (previous) previous.next = next;
    else this.first = next;
    if (next) next.previous = previous;
    else this.last = previous;
    deadline.previous = deadline.next = undefined;
    // The timer stays: it fires when the oldest it waited for would have been due, and then
    // waits for the oldest left, if any.
  }

  private wake(ms: number): void {
    this.timer = setTimeout(() => this.expire(), ms);
    // Unreferenced: a body still arriving has its socket, which keeps the process alive; the
    // timer alone must not, after the last body finished.
    (this.timer as { unref?: () => void }).unref?.();
  }

  private expire(): void {
    this.timer = undefined;
    const now = performance.now();
    try {
      for (let oldest = this.first; oldest && oldest.due <= now; oldest = this.first) {
        this.finish(oldest);
        oldest.expire();
      }
    } finally {
      // Timers may fire a little before performance.now() says the oldest is due: then it waits again.
      if (this.first && !this.timer) this.wake(Math.max(1, Math.ceil(this.first.due - performance.now())));
    }
  }
}

const lists = new Map<number, Deadlines>();

/** The deadline list of one timeout (a receiver has one `bodyTimeout`; a process has few). */
function deadlinesOf(timeout: number): Deadlines {
  let deadlines = lists.get(timeout);
  if (!deadlines) {
    deadlines = new Deadlines(timeout);
    lists.set(timeout, deadlines);
  }
  return deadlines;
}
