// The processing side of the queue hand-off: a BullMQ worker running the typed router.
// `REDIS_PORT=6379 npx tsx examples/bullmq/worker.ts`; start as many as you need.
import { fileURLToPath } from "node:url";
import { createRouter } from "flag-webhooks";
import { type EventJob, processEvents } from "flag-webhooks/bullmq";

// The context after the event is the BullMQ job (its id, attemptsMade, log()…).
export const router = createRouter<[job: EventJob]>()
  .on("flag.updated", (event, job) => {
    const changes = event.data.changes
      .map((change) => `${change.path}: ${JSON.stringify(change.from)} → ${JSON.stringify(change.to)}`)
      .join(", ");
    console.log(`processed ${event.id} flag.updated ${event.data.flag} (${changes}) attempt ${job.attemptsMade + 1}`);
  })
  .on(["flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"], (event) => {
    console.log(`processed ${event.id} ${event.type}`);
  })
  .on("unknown", (event) => console.log(`processed ${event.id} unknown type ${event.originalType}`));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const connection = { host: process.env.REDIS_HOST ?? "127.0.0.1", port: Number(process.env.REDIS_PORT ?? 6379) };
  const worker = processEvents({ queue: "flag-events", connection, onEvent: router, concurrency: 10 });
  worker.on("ready", () => console.log("worker ready"));
  worker.on("failed", (job, error) => console.error(`failed ${job?.id}: ${error.message}`));
  worker.on("error", (error) => console.error("worker:", error.message));
  process.on("SIGTERM", () => void worker.close().then(() => process.exit(0)));
}
