// The receiver under soak: the Express middleware in Express, counting each event id it is
// handed. Run by scripts/soak.mjs as a child process so its memory is measured on its own.
import express from "express";
import { webhookMiddleware } from "../dist/express.js";

const seen = new Map();
const app = express();
app.post("/webhooks", webhookMiddleware({ secret: process.env.SOAK_SECRET, limit: "64kb" }), (req, res) => {
  const id = req.webhookEvent.id;
  seen.set(id, (seen.get(id) ?? 0) + 1);
  res.sendStatus(204);
});
const server = app.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
server.keepAliveTimeout = 30_000;

process.on("message", (message) => {
  if (message === "stats") {
    let duplicates = 0;
    for (const n of seen.values()) if (n > 1) duplicates++;
    process.send({ rss: process.memoryUsage().rss, handled: seen.size, duplicates });
  } else if (message === "gc") {
    globalThis.gc?.();
    process.send({ gc: true });
  } else if (message === "exit") {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
