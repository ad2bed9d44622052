// The bullmq entry of the packed package, once the consumer installed bullmq (its optional peer):
// loads through import and require, and its enqueueTo answers 503 when Redis is unreachable.
import { createRequire } from "node:module";
import { Queue } from "bullmq";
import * as esm from "flag-webhooks/bullmq";

const require = createRequire(import.meta.url);
const cjs = require("flag-webhooks/bullmq");
const { WebhookError } = require("flag-webhooks");
// Nothing listens on port 1: the add can only time out.
const queue = new Queue("flag-events", { connection: { host: "127.0.0.1", port: 1 } });
queue.on("error", () => {});
const event = { id: "evt_1", type: "flag.created", createdAt: "2026-01-01T00:00:00Z", environment: "x", data: {} };
const error = await esm
  .enqueueTo(queue, { timeout: 200 })(event)
  .catch((e) => e);
await queue.close().catch(() => {});
console.log(
  JSON.stringify({
    esm: Object.keys(esm).sort(),
    cjs: Object.keys(cjs).sort(),
    jobId: cjs.eventJobId("a:b"),
    code: error.code,
    instanceofRequire: error instanceof WebhookError,
  }),
);
process.exit(0);
