// The page's event stream on a real node:http server, read by fetch as the page's EventSource
// reads it.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EventStream } from "../../src/emulator/stream.js";

let server: Server | undefined;
let stream: EventStream | undefined;

afterEach(async () => {
  stream?.close();
  const open = server;
  server = undefined;
  open?.closeAllConnections();
  if (open) await new Promise((resolve) => open.close(resolve));
});

async function serve(): Promise<{ url: string; stream: EventStream }> {
  const events = new EventStream();
  stream = events;
  server = createServer((req, res) => events.open(req, res));
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, stream: events };
}

/** Reads the stream until it ends (the text) or fails (the error). */
async function readAll(response: Response): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    text += decoder.decode(value, { stream: true });
  }
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  return check();
};

describe("EventStream", () => {
  it("sends each event to every page, and ends every stream cleanly when closed", async () => {
    const { url, stream } = await serve();
    const pages = await Promise.all([fetch(url), fetch(url)]);
    expect(pages.map((page) => page.headers.get("content-type"))).toEqual([
      "text/event-stream; charset=utf-8",
      "text/event-stream; charset=utf-8",
    ]);
    expect(await until(() => stream.pages === 2)).toBe(true);
    stream.send("delivery", { id: "dlv_1" });
    const texts = pages.map(readAll);
    stream.close();
    expect(await Promise.all(texts)).toEqual([
      'retry: 1000\n\nevent: delivery\ndata: {"id":"dlv_1"}\n\n',
      'retry: 1000\n\nevent: delivery\ndata: {"id":"dlv_1"}\n\n',
    ]);
    expect(stream.pages).toBe(0);
  });

  it("forgets a page that went away", async () => {
    const { url, stream } = await serve();
    const gone = new AbortController();
    await fetch(url, { signal: gone.signal });
    const staying = await fetch(url);
    expect(await until(() => stream.pages === 2)).toBe(true);
    gone.abort();
    expect(await until(() => stream.pages === 1)).toBe(true);
    stream.send("projects", []);
    const text = readAll(staying);
    stream.close();
    expect(await text).toBe("retry: 1000\n\nevent: projects\ndata: []\n\n");
  });
});
