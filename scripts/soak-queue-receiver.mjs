// A receiver under `npm run soak:queue`: the Express middleware with one of three handlers,
// chosen by SOAK_MODE: "none" (answers 204 at once), "inline" (a 20 ms handler run in the
// request, then 204), "queue" (enqueueTo: 202 once Redis has the job). Run by soak-queue.mjs.
import { Queue } from "bullmq";
import express from "express";
import { enqueueTo } from "../dist/bullmq.js";
import { webhookMiddleware } from "../dist/express.js";

const mode = process.env.SOAK_MODE;
const cost = Number(process.env.SOAK_HANDLER_MS);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let queue;
let onEvent;
if (mode === "queue") {
  queue = new Queue("flag-events", { connection: { host: "127.0.0.1", port: Number(process.env.SOAK_REDIS_PORT) } });
  queue.on("error", (error) => console.error("receiver queue:", error.message));
  onEvent = enqueueTo(queue);
} else if (mode === "inline") {
  onEvent = () => sleep(cost);
} else {
  onEvent = () => {};
}
const app = express();
app.post("/webhooks", webhookMiddleware({ secret: process.env.SOAK_SECRET, limit: "64kb", onEvent }));
const server = app.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
server.keepAliveTimeout = 30_000;
process.on("message", async (message) => {
  // The parent reads the CPU time used during its load (user + system, µs).
  if (message === "cpu") process.send({ cpu: process.cpuUsage() });
  if (message === "exit") {
    server.closeAllConnections();
    server.close();
    await queue?.close();
    process.exit(0);
  }
});
