import { request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { DeliveryCase } from "./cases.js";

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
