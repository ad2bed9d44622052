// flag-webhooks/bullmq: hand verified events to a BullMQ queue on Redis and process them in
// workers. BullMQ is this entry's optional peer: the core and the other entries never
// import it; here only `Worker` and `UnrecoverableError` are needed at run time.
import type { ConnectionOptions, Job, JobsOptions, Queue, WorkerOptions } from "bullmq";
import { UnrecoverableError, Worker } from "bullmq";
import { WebhookError } from "../errors.js";
import type { WebhookEvent } from "../events.js";
import type { WebhookReply } from "../receiver/options.js";
import type { Secret } from "../signature.js";
import { checkScope } from "../store-contract/keys.js";
import type { QueueTelemetry } from "../telemetry.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";
import { withTimeout } from "../util/timeout.js";
import { checkKey, checkKeys, readMessage, writeMessage } from "./message.js";
import { isQueueTelemetry, processTraced, withTraceContext } from "./trace.js";

/** The queue {@link enqueueTo} adds jobs to: a BullMQ `Queue` (any data type). */
export type EventQueue = Pick<Queue, "add" | "defaultJobOptions">;

/** A job {@link processEvents} hands to `onEvent`: its data is the verified event. */
export type EventJob = Job<WebhookEvent>;

/** Options of {@link enqueueTo}. */
export interface EnqueueOptions {
  /**
   * Job options for every event (BullMQ's `JobsOptions`), over the queue's `defaultJobOptions`
   * and these defaults: `attempts: 5`, `backoff: { type: "exponential", delay: 1000 }`,
   * `removeOnComplete: { age: 86400 }` (a completed job, and so the duplicate check on its
   * event id, is kept at least a day) and `removeOnFail: false` (failed jobs stay for inspection).
   * `jobId` is always the encoded event id ({@link eventJobId}) and cannot be set here.
   */
  job?: Omit<JobsOptions, "jobId">;
  /**
   * The endpoint these events came to, when several endpoints feed one queue: 1 to 100
   * characters of `A-Z a-z 0-9 . _ -`, put in the job id (`@<scope>/event-<id>`). The service
   * sends one event, with one id, to every endpoint subscribed to it; without a scope, the second
   * endpoint's copy finds the first endpoint's job and adds none. Without it, the queue is the
   * scope: give each endpoint its own queue.
   */
  scope?: string;
  /**
   * How long to wait for Redis to acknowledge the job, in ms or as a duration such as `"3s"`;
   * past it the delivery is answered `503 store_unavailable` so the sender retries. Default 3 s.
   * (While Redis is unreachable, BullMQ's client queues commands and reconnects, so an
   * unbounded `queue.add` could outlast the sender's own timeout.)
   */
  timeout?: number | string;
  /**
   * Carries the trace context of the delivery with each job (`openTelemetry()` from
   * `flag-webhooks/otel`), in the job's options (`opts.telemetry.metadata`): `job.data` stays the
   * event. {@link processEvents} with the same option continues the trace.
   */
  telemetry?: QueueTelemetry;
  /**
   * A key of the app's own (not the webhook secret) to sign each job with: the job's data gets
   * the HMAC-SHA256 of the event's JSON under this key, so {@link processEvents} with the same key
   * in `verifyWith` runs only jobs this receiver added. Default: none, jobs are not signed, and
   * anyone who can write to the Redis can add events the workers will run.
   */
  signWith?: string;
}

/** The job options {@link enqueueTo} sets unless the queue or the caller sets them. */
const DEFAULT_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: "exponential", delay: 1000 },
  removeOnComplete: { age: 24 * 60 * 60 },
  removeOnFail: false,
} satisfies JobsOptions;
const DEFAULT_TIMEOUT = 3000;
const ACCEPTED: WebhookReply = { status: 202 };

/**
 * The BullMQ job id of an event: the event id, with `%` and `:` percent-encoded (BullMQ refuses
 * custom ids that contain `:`), after `event-` (BullMQ also refuses ids that read as integers);
 * with a `scope` (see {@link EnqueueOptions}), after `@<scope>/`. One event id and scope always
 * give the same job id, and two different pairs never give the same one.
 *
 * @example
 * ```ts
 * const job = await queue.getJob(eventJobId("evt_01HZX3K9")); // "event-evt_01HZX3K9"
 * const audit = await queue.getJob(eventJobId("evt_01HZX3K9", "audit-app")); // "@audit-app/event-evt_01HZX3K9"
 * ```
 */
export function eventJobId(eventId: string, scope?: string): string {
  const id = `event-${eventId.replace(/[%:]/g, (char) => (char === "%" ? "%25" : "%3A"))}`;
  // A scope holds no "/" and an unscoped id never starts with "@": no pair collides with another.
  return scope === undefined ? id : `@${checkScope(scope, "eventJobId")}/${id}`;
}

/**
 * An `onEvent` for any adapter (fetch `webhookHandler`, Express or Koa `webhookMiddleware`)
 * that adds each verified event to a BullMQ queue as a job named after its type, and answers
 * `202` only once Redis acknowledged the job. The job id is the event id ({@link eventJobId}),
 * so a duplicate delivery, to this receiver or another one on the same Redis, adds no second
 * job and is answered `202` too, for as long as the first job is kept (`removeOnComplete`).
 * When Redis fails or does not answer within `timeout`, it throws
 * `WebhookError("store_unavailable")`: the delivery is answered `503` and the sender retries.
 *
 * @example
 * ```ts
 * import { Queue } from "bullmq";
 * import { enqueueTo } from "flag-webhooks/bullmq";
 * import { webhookHandler } from "flag-webhooks/fetch";
 *
 * const queue = new Queue("flag-events", { connection: { host: "127.0.0.1", port: 6379 } });
 * const handler = webhookHandler({ secret: process.env.WEBHOOK_SECRET!, maxAge: "5m", onEvent: enqueueTo(queue) });
 * Bun.serve({ port: 3000, fetch: handler });
 * ```
 */
export function enqueueTo(
  queue: EventQueue,
  options: EnqueueOptions = {},
): (event: WebhookEvent) => Promise<WebhookReply> {
  if (typeof queue?.add !== "function") {
    throw new TypeError("flag-webhooks: enqueueTo(queue) needs a BullMQ Queue");
  }
  const timeout =
    options.timeout === undefined ? DEFAULT_TIMEOUT : parseDuration(options.timeout, "timeout", TIMER_MAX);
  const scope = options.scope === undefined ? undefined : checkScope(options.scope, "enqueueTo");
  const { jobId: _ignored, ...job } = (options.job ?? {}) as JobsOptions;
  const jobOptions: JobsOptions = { ...DEFAULT_JOB_OPTIONS, ...queue.defaultJobOptions, ...job };
  const { telemetry } = options;
  const key = checkKey(options.signWith, "enqueueTo");

  return async function enqueueEvent(event) {
    const opts: JobsOptions = { ...jobOptions, jobId: eventJobId(event.id, scope) };
    const data = await writeMessage(event, key);
    const added = queue.add(event.type, data, telemetry ? withTraceContext(telemetry, opts) : opts);
    try {
      // A job that lands after the timeout is harmless: the sender's retry finds it by its id.
      await withTimeout(added, timeout, () => new Error(`Redis did not acknowledge the job within ${timeout} ms`));
    } catch (cause) {
      throw new WebhookError("store_unavailable", "the event queue is unavailable; retry later", { cause });
    }
    return ACCEPTED;
  };
}

/** Options of {@link processEvents}: BullMQ's `WorkerOptions` plus the queue name and handler. */
export interface ProcessEventsOptions extends Omit<WorkerOptions, "telemetry"> {
  /** The queue's name, as given to `new Queue(name)` on the receiving side. */
  queue: string;
  /** Redis, as BullMQ takes it: connection options or an ioredis instance. */
  connection: ConnectionOptions;
  /**
   * Runs each event, typed (`event.type` narrows; a router from `createRouter` fits),
   * with its BullMQ job. If it throws, the job is retried with its `attempts` and `backoff`
   * (set by {@link enqueueTo}); once they are spent it stays in the queue's failed set with the
   * error. Throw BullMQ's `UnrecoverableError` to fail at once, without retries.
   */
  onEvent: (event: WebhookEvent, job: EventJob) => unknown;
  /**
   * Runs each job in a span (`flag-webhooks.process`) of the trace its delivery began, every
   * retry included: `openTelemetry()` from `flag-webhooks/otel`, as given to {@link enqueueTo}.
   * BullMQ's own telemetry (`bullmq-otel`) is passed on to the Worker as before.
   */
  telemetry?: QueueTelemetry | WorkerOptions["telemetry"];
  /**
   * The key {@link enqueueTo} signs with (`signWith`), or a list of keys while rotating (newest
   * first): each job must carry a signature made with one of them. A job without a valid one
   * never reaches `onEvent`: it fails at once, without retries, and stays in the queue's failed
   * set with the reason (`job 42 is not signed by our receiver: …`; `worker.on("failed")` sees
   * it). Default: none, any job that holds a valid event is run, whoever added it.
   */
  verifyWith?: Secret;
}

/**
 * Starts a BullMQ `Worker` on the queue that {@link enqueueTo} feeds, running `onEvent` for each
 * event, and returns it (close it with `await worker.close()`). Any other option is BullMQ's
 * (`concurrency`, `lockDuration`, `stalledInterval`, `limiter`…). A job whose worker died
 * mid-handler is run again by another worker once its lock expires (BullMQ's stalled-job check):
 * processing is at least once, so make the handler idempotent.
 *
 * @example
 * ```ts
 * import { createRouter } from "flag-webhooks";
 * import { processEvents } from "flag-webhooks/bullmq";
 *
 * const router = createRouter().on("flag.updated", async (event) => {
 *   console.log(event.data.flag, event.data.changes);
 * });
 * const worker = processEvents({ queue: "flag-events", connection: { host: "127.0.0.1", port: 6379 }, onEvent: router, concurrency: 10 });
 * process.on("SIGTERM", () => void worker.close());
 * ```
 */
export function processEvents(options: ProcessEventsOptions): Worker<WebhookEvent> {
  const { queue, onEvent, telemetry, verifyWith, ...rest } = options ?? ({} as ProcessEventsOptions);
  const traced = isQueueTelemetry(telemetry) ? telemetry : undefined;
  const workerOptions: WorkerOptions =
    traced || telemetry === undefined ? rest : { ...rest, telemetry: telemetry as WorkerOptions["telemetry"] };
  if (typeof queue !== "string" || queue === "") {
    throw new TypeError('flag-webhooks: option "queue" must be the name of the BullMQ queue');
  }
  if (typeof onEvent !== "function") throw new TypeError('flag-webhooks: option "onEvent" must be a function');
  const keys = checkKeys(verifyWith, "processEvents");
  return new Worker<WebhookEvent>(
    queue,
    async function processEvent(job) {
      // Only enqueueTo should feed this queue, but anything may add a job to it: its data is
      // validated by the receiver's own parser (and its signature checked, with verifyWith), and
      // a job refused fails at once, not retried.
      const event = await jobEvent(job, keys);
      return traced ? processTraced(traced, job, event, async () => onEvent(event, job)) : onEvent(event, job);
    },
    workerOptions,
  );
}

/**
 * The event a job holds, read as every hand-off reads its messages ({@link readMessage});
 * throws `UnrecoverableError` with the reason otherwise.
 */
async function jobEvent(job: Job<unknown>, keys: Secret | undefined): Promise<WebhookEvent> {
  try {
    return await readMessage(job.data, keys);
  } catch (error) {
    const refused = error instanceof WebhookError && error.code === "invalid_signature";
    const what = refused ? "is not signed by our receiver" : "does not hold a valid flag-webhooks event";
    throw new UnrecoverableError(`job ${job.id} ${what}: ${(error as Error).message}`);
  }
}
