import { request as httpRequest, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterEach } from "vitest";
import type { DeliveryCase } from "./cases.js";

// Real HTTP for the tests: servers on loopback ports, started and closed around each test, and
// clients that send a delivery's exact bytes and read the whole answer.

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
}

/**
 * Sends one case over real HTTP with node:http's client: repeated headers go out as separate
 * lines, and a streamed body goes out in chunks with no Content-Length.
 */
export function send(server: Server, c: DeliveryCase, path = "/webhooks"): Promise<Answer> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path, method: c.method ?? "POST", headers: c.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json: text ? JSON.parse(text) : undefined });
        });
      },
    );
    // The server may answer 413 and close before the whole body is sent; the answer still counts.
    req.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "ECONNRESET" && error.code !== "EPIPE") reject(error);
    });
    if (c.streamed) {
      req.setHeader("transfer-encoding", "chunked");
      const step = Math.ceil(c.body.length / 4);
      for (let i = 0; i < c.body.length; i += step) req.write(c.body.subarray(i, i + step));
      req.end();
    } else if (c.body.length > 0 || (c.method ?? "POST") === "POST") {
      req.setHeader("content-length", c.body.length);
      req.end(c.body);
    } else {
      req.end();
    }
  });
}

export async function listen(server: Server): Promise<Server> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

export async function close(server: Server | undefined): Promise<void> {
  if (!server) return;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * A listener for each test: `serve(server)` listens on a free loopback port, and every server it
 * started is closed after the test (its connections cut first).
 */
export function serverPerTest(): (server: Server | Promise<Server>) => Promise<Server> {
  const open: Server[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((server) => close(server)));
  });
  return async (server) => {
    const listening = await listen(await server);
    open.push(listening);
    return listening;
  };
}

/** The URL of `path` on a listening server (an HTTP one, or any net server). */
export function urlOf(server: Pick<Server, "address">, path = "/webhooks"): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
}

/** What a test reads from the answer to a delivery. */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The Webhook-Duplicate header: "true" when the event was handled already. */
  duplicate: string | null;
  /** The error code of a refusal in the service's error shape, if the answer is one. */
  code: string | undefined;
}

/**
 * POSTs a delivery (its exact body and headers) with fetch to a listening server, or to a URL, and
 * reads the whole answer.
 */
export async function post(
  to: Server | string,
  delivery: { body: string | Uint8Array; headers: Record<string, string> },
  init: { path?: string; signal?: AbortSignal } = {},
): Promise<Reply> {
  const url = typeof to === "string" ? to : urlOf(to, init.path);
  const body = typeof delivery.body === "string" ? delivery.body : new Uint8Array(delivery.body);
  const response = await fetch(url, { method: "POST", body, headers: delivery.headers, signal: init.signal });
  const text = await response.text();
  let code: string | undefined;
  if (text.startsWith("{")) {
    try {
      code = JSON.parse(text).error?.code;
    } catch {
      // Not JSON after all: no error code.
    }
  }
  return {
    status: response.status,
    headers: response.headers,
    text,
    duplicate: response.headers.get("webhook-duplicate"),
    code,
  };
}

/** One attempt of a sender: the status of the answer, read whole, or 0 when the connection broke. */
export async function attempt(
  url: string,
  delivery: { body: string; headers: Record<string, string> },
): Promise<number> {
  try {
    const response = await fetch(url, { method: "POST", body: delivery.body, headers: delivery.headers });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

/** One signed delivery as raw HTTP/1.1 bytes, for {@link exchange}, with `extraHeaders` (each line ending in CRLF). */
export function rawDelivery(d: { body: string; headers: Record<string, string> }, extraHeaders = ""): string {
  const head = Object.entries(d.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  return `POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\n${extraHeaders}content-length: ${Buffer.byteLength(d.body)}\r\n${head}\r\n${d.body}`;
}

/**
 * Writes `bytes` (one or more raw HTTP/1.1 requests, pipelined) on one new connection to a
 * listening server and reads the whole of what it answers, in latin1 so that each byte is one
 * character. The read ends when the server closes the connection (the last request asks it to,
 * with `connection: close`) and every response it began has closed on its side, so whatever the
 * app does once an answer is sent (a `finish` listener, a framework's onResponse hook) is done
 * too: no wait for a fixed time, which a loaded machine overruns and an idle one wastes.
 * A server that never closes it (a fault) gets `giveUp` ms: what came by then is returned, so the
 * test fails on what was answered rather than on its own timeout.
 */
export function exchange(server: Server, bytes: string, giveUp = 10_000): Promise<string> {
  const { port } = server.address() as AddressInfo;
  let open = 0;
  let clientClosed = false;
  return new Promise((resolve) => {
    let received = "";
    const settle = () => {
      if (!clientClosed || open > 0) return;
      server.off("request", track);
      clearTimeout(limit);
      // One turn more: what a response's "close" listeners start (a promise, a deferred callback) runs.
      setImmediate(() => resolve(received));
    };
    const track = (_req: unknown, res: { once(event: "close", listener: () => void): unknown }) => {
      open++;
      res.once("close", () => {
        open--;
        settle();
      });
    };
    server.on("request", track);
    const socket = connect(port, "127.0.0.1");
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
    });
    socket.on("error", () => {});
    const limit = setTimeout(() => {
      server.off("request", track);
      socket.destroy();
      resolve(received);
    }, giveUp);
    limit.unref();
    socket.on("close", () => {
      clientClosed = true;
      settle();
    });
    socket.write(bytes);
  });
}
