import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The page's live updates: one Server-Sent Events response per open page, each sent every
 * change. A comment every 15 s keeps an idle stream open (proxies and browsers drop a silent
 * one); the timer does not keep the process alive.
 */
export class EventStream {
  private readonly responses = new Set<ServerResponse>();
  private readonly keepAlive = setInterval(() => {
    for (const res of this.responses) res.write(": keep-alive\n\n");
  }, 15_000).unref();

  /** Answers `req` with the stream; it is sent every event until the client goes away. */
  open(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
    });
    // A dropped stream is reopened by the browser after this many ms.
    res.write("retry: 1000\n\n");
    this.responses.add(res);
    req.on("close", () => this.responses.delete(res));
  }

  /** How many pages follow the stream: a page that went away is forgotten at once. */
  get pages(): number {
    return this.responses.size;
  }

  /** Sends `data` as JSON to every open page, as an event named `event`. */
  send(event: string, data: unknown): void {
    const message = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of this.responses) res.write(message);
  }

  /** Ends every stream, cleanly (the pages see it end, not fail), and the keep-alive timer. */
  close(): void {
    clearInterval(this.keepAlive);
    for (const res of this.responses) res.end();
    this.responses.clear();
  }
}
