import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/hono";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { close, listen } from "./support/http.js";
import { signedDelivery } from "./support/signed-delivery.js";

// Found by attacking issue 15 item 2 in Hono: a route that forgets to return its Response (Hono answers
// 500 "Context is not finalized") is settled with the placeholder Response that reading c.res
// creates (200), so the event is marked done although the sender got a 500. Failed on
// 832a504, before the fix.

const SECRET = "attack-hono-secret";
const delivery = () => signedDelivery(SECRET);

let server: Server | undefined;
afterEach(async () => {
  await close(server);
  server = undefined;
});

describe("Hono, the route after the middleware, returning no Response", () => {
  it("is answered 500 by Hono, so the claim is released and the retry runs the route", async () => {
    let runs = 0;
    const app = new Hono();
    app.onError((_error, c) => c.text("route failed", 500));
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 } }),
      (c) => {
        runs++;
        // The classic slip: `c.body(null, 204)` without `return` (the second time it is there).
        if (runs === 1) {
          c.body(null, 204);
          return undefined as unknown as Response;
        }
        return c.body(null, 204);
      },
    );
    server = await listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    const { port } = server.address() as { port: number };
    const d = delivery();
    const post = async () => {
      const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: "POST",
        body: d.body,
        headers: d.headers,
      });
      await response.arrayBuffer();
      return { status: response.status, duplicate: response.headers.get("webhook-duplicate") };
    };
    expect((await post()).status).toBe(500);
    // Today: { 204, "true" }: marked done with c.res's placeholder 200, and the route never reruns.
    expect(await post()).toEqual({ status: 204, duplicate: null });
    expect(runs).toBe(2);
  });
});
