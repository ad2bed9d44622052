// The progress line of a long `flag-webhooks inbox` run, on stderr so that stdout stays the
// result: rewritten in place on a terminal; elsewhere printed only when asked (--progress), one
// line at most each second, so a log is not flooded.

const EVERY = 1000;

/** One line of progress on `stream`. */
export class Progress {
  readonly #stream: NodeJS.WritableStream;
  readonly #terminal: boolean;
  readonly #shown: boolean;
  #last = "";
  #printedAt = 0;
  #pending = false;

  constructor(stream: NodeJS.WritableStream, asked: boolean) {
    this.#stream = stream;
    this.#terminal = (stream as { isTTY?: boolean }).isTTY === true;
    this.#shown = this.#terminal || asked;
  }

  /** Shows `text` as the current progress. */
  update(text: string): void {
    if (!this.#shown || text === this.#last) return;
    this.#last = text;
    if (this.#terminal) {
      this.#stream.write(`\r\x1b[K${text}`);
      this.#pending = true;
      return;
    }
    const now = Date.now();
    if (now - this.#printedAt < EVERY) {
      this.#pending = true;
      return;
    }
    this.#printedAt = now;
    this.#pending = false;
    this.#stream.write(`${text}\n`);
  }

  /** Ends the line: on a terminal, the cursor to a new line; elsewhere, the last text if it was held back. */
  end(): void {
    if (!this.#pending) return;
    this.#pending = false;
    this.#stream.write(this.#terminal ? "\n" : `${this.#last}\n`);
  }
}
