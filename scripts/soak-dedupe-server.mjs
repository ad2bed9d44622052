// One receiver of the dedupe soak (scripts/soak-dedupe.mjs): Express with the Express
// middleware and a RedisDedupeStore on the shared redis-server, counting each event id its
// handler runs. Two of these run at once, one with ioredis and one with node-redis.
import express from "express";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { webhookMiddleware } from "../dist/express.js";
import { RedisDedupeStore } from "../dist/index.js";

const { SOAK_SECRET, SOAK_DELIVERIES, SOAK_REDIS_URL, SOAK_CLIENT } = process.env;

let client;
if (SOAK_CLIENT === "ioredis") {
  client = new Redis(SOAK_REDIS_URL);
} else {
  client = createClient({ url: SOAK_REDIS_URL });
  await client.connect();
}
const clientErrors = [];
client.on("error", (error) => clientErrors.push(String(error)));
const store = new RedisDedupeStore(client, { prefix: "soak:", scope: "soak-app" });

// One counter per expected id (evt_0 … evt_N-1): a fixed ~100 KB, so the memory figure is the
// library's, the client's and Express's, not a growing Map of ids.
const counts = new Uint8Array(Number(SOAK_DELIVERIES));
let foreign = 0;
const reported = [];
function count(id) {
  const n = Number(id.slice(4));
  if (Number.isInteger(n) && n >= 0 && n < counts.length) counts[n] = Math.min(counts[n] + 1, 255);
  else foreign++;
}

const options = {
  secret: SOAK_SECRET,
  limit: "64kb",
  dedupe: { store, ttl: "1h" },
  onError: (error) => reported.length < 20 && reported.push(String(error)),
};
const app = express();
if (SOAK_CLIENT === "ioredis") {
  // This receiver hands the event on with next(): settled when the route's answer finishes.
  app.post("/webhooks", webhookMiddleware(options), (req, res) => {
    count(req.webhookEvent.id);
    res.sendStatus(204);
  });
} else {
  // This one runs onEvent and answers itself.
  app.post("/webhooks", webhookMiddleware({ ...options, onEvent: (event) => count(event.id) }));
}
const server = app.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
server.keepAliveTimeout = 30_000;

process.on("unhandledRejection", (reason) => {
  reported.push(`unhandled rejection: ${reason}`);
});
process.on("message", (message) => {
  if (message === "stats") {
    process.send({
      rss: process.memoryUsage().rss,
      heapUsed: process.memoryUsage().heapUsed,
      counts: Buffer.from(counts).toString("base64"),
      foreign,
      reported,
      clientErrors: clientErrors.slice(0, 5),
    });
  } else if (message === "gc") {
    globalThis.gc?.();
    process.send({ gc: true });
  } else if (message === "exit") {
    server.closeAllConnections();
    server.close(async () => {
      if (SOAK_CLIENT === "ioredis") client.disconnect();
      else client.destroy();
      process.exit(0);
    });
  }
});
process.on("disconnect", () => process.exit(0));
