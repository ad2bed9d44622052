import { randomUUID } from "node:crypto";
import { Queue, type Worker } from "bullmq";
import type { Telemetry, WebhookEvent } from "flag-webhooks";
import { type EnqueueOptions, enqueueTo, type ProcessEventsOptions, processEvents } from "flag-webhooks/bullmq";
import { webhookHandler } from "flag-webhooks/fetch";
import { signedRequest } from "flag-webhooks/testing";

/**
 * One BullMQ hand-off on a real Redis, for the queue tests: a fetch receiver enqueueing to a
 * queue of its own, a worker (processEvents) on it, and what the worker handed to onEvent.
 */
export interface BullmqHandOff {
  queue: Queue;
  worker: Worker<WebhookEvent>;
  /** Every event onEvent was given, in order. */
  handled: WebhookEvent[];
  /**
   * A delivery of `event`, signed with `secret`, to a fetch receiver whose onEvent is
   * `enqueueTo(queue, enqueue)`, with the receiver's own `telemetry` if given.
   */
  deliver(event: object, enqueue?: EnqueueOptions, telemetry?: Telemetry): Promise<Response>;
  /** The failed job's attempts and reason, once it has failed. */
  failed(jobId: string): Promise<{ attempts: number; reason: string } | undefined>;
  close(): Promise<void>;
}

export function startBullmqHandOff(
  port: number,
  secret: string,
  options: Partial<Omit<ProcessEventsOptions, "queue" | "connection" | "onEvent">> = {},
): BullmqHandOff {
  const connection = { host: "127.0.0.1", port };
  const name = `queue-test-${randomUUID()}`;
  const queue = new Queue(name, { connection });
  queue.on("error", () => {});
  const handled: WebhookEvent[] = [];
  const worker = processEvents({ ...options, queue: name, connection, onEvent: (event) => void handled.push(event) });
  worker.on("error", () => {});
  return {
    queue,
    worker,
    handled,
    async deliver(event, enqueue, telemetry) {
      const request = await signedRequest({ secret, event });
      return webhookHandler({ secret, telemetry, onEvent: enqueueTo(queue, enqueue) })(request);
    },
    async failed(jobId) {
      const job = await queue.getJob(jobId);
      if (!job?.failedReason) return undefined;
      return { attempts: job.attemptsMade, reason: job.failedReason };
    },
    async close() {
      await worker.close();
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    },
  };
}
