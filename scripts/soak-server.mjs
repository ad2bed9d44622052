// The receiver under soak: the Express middleware in Express, counting each event id it is
// handed. Run by scripts/soak.mjs as a child process so its memory is measured on its own.
import express from "express";
import { webhookMiddleware } from "../dist/express.js";

// One counter per expected id (evt_0 … evt_N-1), so the bookkeeping itself stays a fixed
// ~100 KB and the memory figure is the library's and Express's, not a growing Map of ids.
const counts = new Uint8Array(Number(process.env.SOAK_DELIVERIES));
let foreign = 0;
const app = express();
app.post("/webhooks", webhookMiddleware({ secret: process.env.SOAK_SECRET, limit: "64kb" }), (req, res) => {
  const n = Number(req.webhookEvent.id.slice(4));
  if (Number.isInteger(n) && n >= 0 && n < counts.length) counts[n] = Math.min(counts[n] + 1, 255);
  else foreign++;
  res.sendStatus(204);
});
const server = app.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
server.keepAliveTimeout = 30_000;

process.on("message", (message) => {
  if (message === "stats") {
    let handled = 0;
    let duplicates = 0;
    for (const n of counts) {
      if (n > 0) handled++;
      if (n > 1) duplicates++;
    }
    process.send({ rss: process.memoryUsage().rss, handled, duplicates, foreign });
  } else if (message === "gc") {
    globalThis.gc?.();
    process.send({ gc: true });
  } else if (message === "exit") {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
