import type { Server } from "node:http";
import { connect } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { webhookHandler } from "flag-webhooks/fetch";
import { webhookMiddleware } from "flag-webhooks/hono";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "../support/http.js";

// Found by attacking issue 15 item 10 where Hono and the fetch handler run on Node (@hono/node-server):
// the core marks an early refusal `close`, but toResponse drops it, so the 401 to an unsigned
// request announcing 1 GiB goes out keep-alive and node-server goes on reading the body until its
// own drain gives up (150-190 MiB read in about 0.5 s on this machine; with `Connection: close`,
// 4 MiB in under 10 ms). Failed on 832a504, before the fix.

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

/** The head of the answer to an unsigned POST that announces 1 GiB and sends its first 64 KiB. */
function unsignedHead(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write("POST /webhooks HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1073741824\r\n\r\n");
      socket.write(Buffer.alloc(65_536, 0x61));
    });
    let data = "";
    socket.on("data", (chunk: Buffer) => {
      data += chunk.toString("latin1");
      const end = data.indexOf("\r\n\r\n");
      if (end >= 0) {
        socket.destroy();
        resolve(data.slice(0, end));
      }
    });
    socket.on("error", reject);
  });
}

describe("an early refusal on @hono/node-server closes the connection (Connection: close)", () => {
  it.each([
    [
      "Hono middleware",
      () => {
        const app = new Hono();
        app.all("/webhooks", webhookMiddleware({ secret: "attack-close-secret" }), (c) => c.body(null, 204));
        return app.fetch;
      },
    ],
    ["fetch webhookHandler", () => webhookHandler({ secret: "attack-close-secret", onEvent: () => undefined })],
  ])("%s", async (_name, make) => {
    server = await listen(createAdaptorServer({ fetch: make() }) as Server);
    const head = await unsignedHead((server.address() as { port: number }).port);
    expect(head).toMatch(/^HTTP\/1\.1 401/);
    // Today: "Connection: keep-alive": the unsigned body is read on until node-server gives up.
    expect(head).toMatch(/\r\nconnection: close(\r\n|$)/i);
  });
});
