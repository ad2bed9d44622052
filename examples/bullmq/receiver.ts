// The receiving side of the queue hand-off: verify, enqueue, answer 202 once Redis has the job.
// `WEBHOOK_SECRET=... REDIS_PORT=6379 npx tsx examples/bullmq/receiver.ts` (PORT, default 3000).
// Run as many receivers as you like on one Redis; run examples/bullmq/worker.ts beside them.
import { fileURLToPath } from "node:url";
import { Queue } from "bullmq";
import express from "express";
import { enqueueTo } from "flag-webhooks/bullmq";
import { webhookMiddleware } from "flag-webhooks/express";

export function createApp(secret: string, queue: Queue): express.Express {
  const app = express();
  // maxAge with the default retention (completed jobs kept a day) makes a replayed duplicate
  // either too old to be accepted or still known by its job id: see the README.
  // One endpoint per queue: the queue is the scope. Several endpoints (webhook subscriptions) on one
  // queue each need enqueueTo(queue, { scope: "their-name" }), or the second one's copy of an
  // event (the service sends it to each with the same id) is taken for a duplicate.
  app.post("/webhooks", webhookMiddleware({ secret, maxAge: "5m", onEvent: enqueueTo(queue) }));
  return app;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const connection = { host: process.env.REDIS_HOST ?? "127.0.0.1", port: Number(process.env.REDIS_PORT ?? 6379) };
  const queue = new Queue("flag-events", { connection });
  queue.on("error", (error) => console.error("queue:", error.message));
  const server = createApp(process.env.WEBHOOK_SECRET ?? "", queue).listen(
    Number(process.env.PORT ?? 3000),
    "127.0.0.1",
    () => {
      const { port } = server.address() as { port: number };
      console.log(`listening on http://127.0.0.1:${port}/webhooks`);
    },
  );
  process.on("SIGTERM", () => server.close(() => void queue.close()));
}
