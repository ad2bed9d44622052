import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createEmulator, type Emulator, type EmulatorOptions } from "flag-webhooks/emulator";
import type { Task } from "./cleanup.js";

/** An emulator for one test, closed by `cleanup` (from cleanupAfterEach) after it. */
export async function startEmulator(cleanup: (task: Task) => void, options: EmulatorOptions = {}): Promise<Emulator> {
  const emulator = await createEmulator(options);
  cleanup(() => emulator.close());
  return emulator;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** Calls the emulator over real HTTP with its token (or the one given), JSON in and out. */
export async function call(
  emulator: Emulator,
  method: string,
  path: string,
  options: { body?: unknown; raw?: string; token?: string | null; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  const token = options.token === undefined ? emulator.token : options.token;
  if (token !== null) headers.authorization ??= `Bearer ${token}`;
  let body: string | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const base = path.startsWith("/_emulator") ? new URL(emulator.url).origin : emulator.url;
  const response = await fetch(`${base}${path}`, { method, headers, body });
  const text = await response.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

export interface Received {
  headers: IncomingMessage["headers"];
  body: string;
}

/** A real receiving endpoint that records every request and answers with `answer(n)` (n from 1). */
export async function receiver(
  answer: (n: number, req: Received) => number | "hang" = () => 204,
): Promise<{ url: string; requests: Received[]; server: Server; close(): Promise<void> }> {
  const requests: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const received = { headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
      requests.push(received);
      const status = answer(requests.length, received);
      if (status === "hang") return;
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(`answer ${requests.length}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    requests,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Resolves when `check` returns something truthy, polling; rejects after `ms`. */
export async function until<T>(check: () => T | undefined | false, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
