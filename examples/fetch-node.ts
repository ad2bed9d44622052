// The fetch handler on a plain Node server (what @hono/node-server and similar bridges do):
// `WEBHOOK_SECRET=... npx tsx examples/fetch-node.ts`.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { webhookHandler } from "flag-webhooks/fetch";
import { describeEvent } from "./handle-events.js";

export function createHandler(secret: string | string[]): (request: Request) => Promise<Response> {
  return webhookHandler({
    secret,
    onEvent: (event) => Response.json({ received: event.id, summary: describeEvent(event) }),
  });
}

/** Turns a Node request into a fetch Request and writes the Response back. */
export function serve(handler: (request: Request) => Promise<Response>) {
  return createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const request = new Request(`http://${req.headers.host ?? "localhost"}${req.url}`, {
      method: req.method,
      headers,
      body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined,
      duplex: "half",
    } as RequestInit);
    const response = await handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT ?? 3000);
  serve(createHandler(process.env.WEBHOOK_SECRET ?? "")).listen(port, "127.0.0.1");
  console.log(`listening on http://127.0.0.1:${port}/`);
}
