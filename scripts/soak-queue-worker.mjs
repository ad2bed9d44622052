// A worker under `npm run soak:queue`: processEvents with a handler that costs SOAK_HANDLER_MS,
// counting each event id it completes so soak-queue.mjs can check every event ran once.
import { processEvents } from "../dist/bullmq.js";

const cost = Number(process.env.SOAK_HANDLER_MS);
const counts = new Uint8Array(Number(process.env.SOAK_DELIVERIES));
let foreign = 0;
const worker = processEvents({
  queue: "flag-events",
  connection: { host: "127.0.0.1", port: Number(process.env.SOAK_REDIS_PORT) },
  concurrency: Number(process.env.SOAK_WORKER_CONCURRENCY ?? 100),
  onEvent: async (event) => {
    await new Promise((resolve) => setTimeout(resolve, cost));
    const n = Number(event.id.slice(4));
    if (Number.isInteger(n) && n >= 0 && n < counts.length) counts[n] = Math.min(counts[n] + 1, 255);
    else foreign++;
  },
});
worker.on("error", (error) => console.error("worker:", error.message));
worker.on("ready", () => process.send({ ready: true }));
process.on("message", async (message) => {
  if (message === "counts") {
    process.send({ counts: Buffer.from(counts.buffer).toString("base64"), foreign });
  } else if (message === "exit") {
    await worker.close();
    process.exit(0);
  }
});
