import { connect, createServer, type Http2ServerResponse } from "node:http2";
import type { AddressInfo } from "node:net";
import { webhookMiddleware } from "flag-webhooks/express";
import { afterAll, describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { GatedStore } from "../support/gated-store.js";

// Attacked: the held 2xx (node/watch-answer.ts; held-methods.test.ts runs it on node:http and
// Express) on node:http2's compatibility response, whose methods are other functions than
// node:http's: a route on bare node:http2 (h2c) calling the Express middleware, answering with a
// head, flushHeaders(), a write and an end on a later turn. Held: the 2xx head reaches the client
// only once the store has recorded the event, and the copy is a duplicate.

const SECRET = "attack-http2-secret";
type Middleware = (req: unknown, res: unknown, next: () => void) => unknown;
const closing: (() => void)[] = [];
afterAll(() => {
  for (const close of closing) close();
});

describe("on node:http2's compatibility API, a held 2xx", () => {
  it("writeHead(200), flushHeaders(), a write, end() later: the head arrives once the store has the event, and a copy is a duplicate", async () => {
    const store = new GatedStore();
    let runs = 0;
    const middleware = webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: 60_000 } }) as unknown as Middleware;
    const server = createServer(
      (req, res) =>
        void middleware(req, res, () => {
          runs++;
          const answer = res as Http2ServerResponse;
          answer.writeHead(200, { "content-type": "text/plain" });
          // Node's Http2ServerResponse has flushHeaders(); @types/node leaves it out.
          (answer as unknown as { flushHeaders(): void }).flushHeaders();
          answer.write("o");
          setImmediate(() => answer.end("k"));
        }),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const client = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    closing.push(
      () => client.close(),
      () => server.close(),
    );
    const d = await delivery(SECRET);
    const post = () =>
      new Promise<{ status: number; recorded: boolean; text: string; duplicate: unknown }>((resolve, reject) => {
        const req = client.request({ ":method": "POST", ":path": "/webhooks", ...d.headers });
        let head = { status: 0, recorded: false, duplicate: undefined as unknown };
        let text = "";
        req.on("response", (headers) => {
          head = {
            status: Number(headers[":status"]),
            recorded: store.recorded,
            duplicate: headers["webhook-duplicate"],
          };
        });
        req.setEncoding("utf8");
        req.on("data", (chunk: string) => {
          text += chunk;
        });
        req.on("end", () => resolve({ ...head, text }));
        req.on("error", reject);
        req.end(d.body);
      });
    // The store records only when opened: a 2xx head that left before would arrive meanwhile.
    setTimeout(() => store.open(), 150);
    const first = await post();
    expect([first.status, first.text, first.recorded]).toEqual([200, "ok", true]);
    const copy = await post();
    expect([copy.status, copy.duplicate, runs]).toEqual([204, "true", 1]);
  });
});
