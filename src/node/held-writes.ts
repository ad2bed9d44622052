import type { ServerResponse } from "node:http";

type Args = unknown[];

/**
 * The most a held answer keeps in memory, in bytes of body: a 2xx cannot leave before the
 * decision, so all of its body waits, and several deliveries at once would each keep theirs
 * (4 streaming 64 MiB held 254 MB). A webhook sender reads the status, not a large body, and 1 MiB
 * is the body limit a delivery itself is read with; a held answer past it is cut, as a route that
 * failed mid-answer, so the sender retries rather than the process paying for the body.
 */
export const MAX_HELD_BYTES = 1024 * 1024;

/**
 * The body writes of a held answer, kept in order and counted, with the back-pressure a socket
 * gives: past the response's high-water mark a write returns false and `drain` follows on the next
 * turn of the event loop (not at the release: the release waits for `end()`, which a writer held
 * on `drain` would never reach), so a streaming writer pauses and lets other work run between chunks.
 * A write's callback is called once its chunk is held, as Node calls it once the chunk is handed
 * to the socket, for the same reason: a writer that awaits each callback before the next write
 * would otherwise never reach `end()`.
 */
export class HeldWrites {
  readonly #res: ServerResponse;
  readonly #highWaterMark: number;
  readonly writes: Args[] = [];
  #bytes = 0;
  #drain: ReturnType<typeof setImmediate> | undefined;

  constructor(res: ServerResponse) {
    this.#res = res;
    this.#highWaterMark = res.writableHighWaterMark;
  }

  /** Whether a chunk (of a write or an end) still fits under {@link MAX_HELD_BYTES}. */
  fits(args: Args): boolean {
    return this.#bytes + byteLength(args) <= MAX_HELD_BYTES;
  }

  /** Keeps a write that fits, and returns what Node's write would: false past the high-water mark. */
  add(args: Args): boolean {
    const [chunk, encoding, callback] = args;
    // The chunk and its encoding are kept for the release; the callback is answered now, and only once.
    if (typeof callback === "function" || typeof encoding === "function") {
      this.writes.push(typeof encoding === "string" ? [chunk, encoding] : [chunk]);
      process.nextTick((typeof callback === "function" ? callback : encoding) as () => void);
    } else {
      this.writes.push(args);
    }
    this.#bytes += byteLength(args);
    // Node's write counts as activity on the connection, putting off its idle timeout
    // (res.setTimeout, server.timeout): a held one does too, or a long answer written all along
    // would be cut as idle only because it is held.
    (this.#res.socket as { _unrefTimer?: () => void } | null)?._unrefTimer?.();
    if (this.#bytes < this.#highWaterMark) return true;
    if (this.#drain === undefined) {
      needsDrain(this.#res, true);
      this.#drain = setImmediate(() => {
        this.#drain = undefined;
        needsDrain(this.#res, false);
        this.#res.emit("drain");
      });
    }
    return false;
  }

  /** No `drain` for an answer that was cut, as Node emits none once a response is destroyed. */
  stop(): void {
    // Nothing is added once stopped (the response has Node's own methods again), so #drain stays.
    clearImmediate(this.#drain);
    needsDrain(this.#res, false);
  }
}

/** `res.writableNeedDrain` reads true while a write waits for `drain`, as Node's does. */
function needsDrain(res: ServerResponse, waits: boolean): void {
  if (waits) Object.defineProperty(res, "writableNeedDrain", { configurable: true, get: () => true });
  else delete (res as { writableNeedDrain?: boolean }).writableNeedDrain;
}

/** The bytes a write's chunk puts on the wire (a string in its encoding, as Node counts it). */
function byteLength(args: Args): number {
  const [chunk, encoding] = args;
  // An encoding that is no encoding's name (none, or the callback in its place) reads as UTF-8 to
  // Node's byteLength, as to Node's write.
  if (typeof chunk === "string") return Buffer.byteLength(chunk, encoding as BufferEncoding);
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

/** The refusal of a held answer past {@link MAX_HELD_BYTES}: its writer gets it, and the answer is cut. */
export function tooLarge(): Error {
  return Object.assign(
    new Error(
      "flag-webhooks: the body of a held 2xx passed 1 MiB, so the answer was cut: answer a webhook with a small body",
    ),
    { code: "ERR_HELD_ANSWER_TOO_LARGE" },
  );
}
