import { createServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import express from "express";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware } from "flag-webhooks/express";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { attempt, rawDelivery, serverPerTest, urlOf } from "../support/http.js";
import { signal } from "../support/signal.js";

// A client that hangs up while routes still work on pipelined deliveries of one keep-alive
// connection: each route's claim stands until it ends its answer, so the sender's retry meanwhile
// gets 409, and each event's route runs once.

const SECRET = "whsec-attack-hang-up";
const listenPerTest = serverPerTest();
/** Listens for the test: the port, for raw pipelined requests, and the URL, for retries. */
async function serve(server: Server): Promise<{ port: number; url: string }> {
  const listening = await listenPerTest(server);
  return { port: (listening.address() as AddressInfo).port, url: urlOf(listening) };
}

describe("Express without onEvent: pipelined deliveries, the client hangs up while both routes work", () => {
  it.each([
    ["resets the connection", "reset"],
    ["half-closes, then closes", "end"],
  ] as const)("the client %s: retries get 409 meanwhile, each event runs once", async (_name, how) => {
    const runs = new Map<string, number>();
    const started = signal(2);
    const left = signal();
    const work = signal();
    const recorded = signal(2);
    const store = new MemoryDedupeStore();
    const complete = store.complete.bind(store);
    store.complete = (id, ttl) => {
      complete(id, ttl);
      recorded.fire();
    };
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret: SECRET, dedupe: { store, ttl: "1h" } }), async (req, res) => {
      const id = req.webhookEvent?.id ?? "?";
      runs.set(id, (runs.get(id) ?? 0) + 1);
      res.once("close", left.fire);
      res.status(200).write("working");
      started.fire();
      // Both first runs work until the test lets them end; a second run of an event (the fault
      // the test looks for) ends at once, so the count below fails rather than the test hanging.
      if (runs.get(id) === 1) await work.fired;
      res.end();
    });
    const { port, url } = await serve(createServer(app));
    const [a, b] = [createEvent("flag.updated"), createEvent("flag.updated")];
    const da = await signedDelivery({ secret: SECRET, event: a });
    const db = await signedDelivery({ secret: SECRET, event: b });
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write(rawDelivery(da) + rawDelivery(db));
    await started.fired;
    if (how === "reset") socket.resetAndDestroy();
    else {
      // Its end sent (the half-close), then the connection closed.
      await new Promise<void>((resolve) => socket.end(resolve));
      socket.destroy();
    }
    // The server saw the client leave: the answer on the wire closed (the watch's "close" listener
    // runs first; the second answer, queued behind it, gets no "close" of its own).
    await left.fired;
    const retries = [await attempt(url, da), await attempt(url, db)];
    work.fire();
    await recorded.fired;
    const later = [await attempt(url, da), await attempt(url, db)];
    expect([retries, later, runs.get(a.id), runs.get(b.id)]).toEqual([[409, 409], [204, 204], 1, 1]);
  });
});

describe("Express without onEvent: the client hangs up, then the route fails after beginning a 2xx (next(err))", () => {
  // Fails: once the client has left, Express's final handler has nothing left to cut (it destroys
  // the socket, already closed, and never touches res), so nothing tells the watch that the route
  // ended: its claim stands until inFlightTtl (60 s by default), and the sender's retries get 409
  // meanwhile instead of running the handler again. Never a second run at once (the claim is
  // safe), only a delay; telling it apart needs a sign of the route's end that Express does not give.
  it.fails("the claim is released once the route failed: the retry runs it again, not 409", async () => {
    let runs = 0;
    const app = express();
    app.post(
      "/webhooks",
      webhookMiddleware({ secret: SECRET, onError: () => {}, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } }),
      (_req, res, next) => {
        runs++;
        if (runs > 1) {
          res.sendStatus(204);
          return;
        }
        res.status(200).write("partial");
        setTimeout(() => next(new Error("failed mid-answer")), 100);
      },
    );
    const { port, url } = await serve(createServer(app));
    const d = await signedDelivery({ secret: SECRET, event: createEvent("flag.updated") });
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write(rawDelivery(d));
    await sleep(50);
    socket.destroy();
    await sleep(200);
    const retry = await attempt(url, d);
    expect([retry, runs]).toEqual([204, 2]);
  });
});
