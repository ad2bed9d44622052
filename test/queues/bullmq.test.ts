import { type ChildProcess, spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { context, propagation, trace } from "@opentelemetry/api";
import { type Telemetry as BullTelemetry, type Job, Queue, type QueueOptions } from "bullmq";
import express from "express";
import { createRouter, parseEvent, WebhookError, type WebhookEvent } from "flag-webhooks";
import { type EventJob, enqueueTo, eventJobId, processEvents } from "flag-webhooks/bullmq";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { openTelemetry } from "flag-webhooks/otel";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "../../examples/fetch-node.js";
import { delivery } from "../support/deliveries.js";
import { close, listen, post as postTo, type Reply } from "../support/http.js";
import { type Sdk, startSdk } from "../support/otel.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// flag-webhooks/bullmq on a real redis-server and real BullMQ. End to end: two receiver instances
// (Express and fetch) each with its own Queue, and two worker processes. In this process: the
// values a user sees in Redis (job name, id, options), the answers and errors, and what a worker
// does with each job; everything from the package is made inside the tests, so a mutant of it is
// run by the tests it changes. The trace across the queue: test/otel/bullmq.test.ts.
const root = resolve(import.meta.dirname, "../..");
const secret = "bullmq-test-secret";
const availability = redisAvailability();

/** A fresh signed delivery of the event `id`, POSTed to a receiver: its status and error code. */
async function post(server: Server, id: string): Promise<Reply> {
  return postTo(server, await delivery(secret, { id }));
}

/** A worker process (test/fixtures/bullmq-worker.ts under tsx) and the lines it printed. */
interface WorkerProcess {
  name: string;
  child: ChildProcess;
  lines: string[];
}

function startWorker(name: string, redisPort: number): Promise<WorkerProcess> {
  // tsx as a loader in this one process (its CLI would run the worker in a child, which a
  // SIGKILL of the pid we hold would leave running).
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/bullmq-worker.ts"], {
    cwd: root,
    env: { ...process.env, TSX_TSCONFIG_PATH: "tsconfig.test.json", WORKER_NAME: name, REDIS_PORT: String(redisPort) },
    stdio: "pipe",
  });
  const worker: WorkerProcess = { name, child, lines: [] };
  let rest = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    const parts = (rest + chunk).split("\n");
    rest = parts.pop() ?? "";
    worker.lines.push(...parts);
  });
  child.stderr?.on("data", (chunk: Buffer) => process.stderr.write(`[${name}] ${chunk}`));
  return new Promise((ready, fail) => {
    const timer = setInterval(() => {
      if (worker.lines.includes(`ready ${name}`)) {
        clearInterval(timer);
        ready(worker);
      }
    }, 50);
    child.once("exit", (code) => {
      clearInterval(timer);
      fail(new Error(`worker ${name} exited with ${code} before it was ready`));
    });
  });
}

async function stopWorker(worker: WorkerProcess): Promise<void> {
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) return;
  const exited = new Promise((done) => worker.child.once("exit", done));
  process.kill(worker.child.pid as number, "SIGKILL");
  await exited;
}

/** Waits until `test()` holds, polling; fails with `what` after `ms`. */
async function until(test: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe.skipIf(!availability.available)("BullMQ queue hand-off (real redis-server, real BullMQ)", () => {
  let redis: RedisServer;
  const queues: Queue[] = [];
  let express1: Server;
  let fetch2: Server;
  let workers: WorkerProcess[] = [];
  const doneLines = () => workers.flatMap((worker) => worker.lines.filter((line) => line.startsWith("done ")));
  const doneCount = (id: string) => doneLines().filter((line) => line.split(" ")[1] === id).length;

  beforeAll(async () => {
    // appendfsync always: an acknowledged job survives the Redis crash of the 503 test below.
    redis = await startRedis(["--appendonly", "yes", "--appendfsync", "always"]);
    const connection = { host: "127.0.0.1", port: redis.port };
    const queue = () => {
      const one = new Queue("flag-events", { connection });
      one.on("error", () => {}); // Redis is stopped on purpose below
      queues.push(one);
      return one;
    };
    const quiet = () => {};
    const app = express();
    app.post("/webhooks", webhookMiddleware({ secret, onEvent: enqueueTo(queue(), { timeout: 500 }), onError: quiet }));
    express1 = await listen(createServer(app));
    fetch2 = await listen(
      serve(webhookHandler({ secret, onEvent: enqueueTo(queue(), { timeout: 500 }), onError: quiet })),
    );
    workers = await Promise.all([startWorker("w1", redis.port), startWorker("w2", redis.port)]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map(stopWorker));
    if (express1) await close(express1);
    if (fetch2) await close(fetch2);
    await Promise.all(queues.map((queue) => queue.close().catch(() => {})));
    await stopRedis(redis);
  });

  it("processes each event exactly once when every delivery is sent twice, to both receivers", async () => {
    const ids = Array.from({ length: 40 }, (_, n) => `evt_twice_${n}`);
    const answers = await Promise.all(
      ids.map(async (id, n) => {
        // Half the copies race each other to the two receivers; the other half arrive one after the other.
        if (n % 2 === 0) return Promise.all([post(express1, id), post(fetch2, id)]);
        const first = await post(fetch2, id);
        return [first, await post(express1, id)];
      }),
    );
    expect(answers.flat().map((answer) => answer.status)).toEqual(Array(80).fill(202));
    await until(() => ids.every((id) => doneCount(id) >= 1), 20_000, "every event to be processed");
    await sleep(500); // time for a second, wrong, run to show up
    expect(ids.map(doneCount)).toEqual(Array(40).fill(1));
    // One job per event id in Redis, none added by the second copy.
    const jobs = await Promise.all(ids.map((id) => (queues[0] as Queue).getJob(eventJobId(id))));
    expect(jobs.map((job) => job?.data.id)).toEqual(ids);
    // Both worker processes took part.
    expect(workers.map((worker) => worker.lines.some((line) => line.startsWith("done evt_twice_")))).toEqual([
      true,
      true,
    ]);
  });

  it("sets its job defaults under the queue's defaultJobOptions and the options given to enqueueTo", async () => {
    const event = (id: string) => createEvent("flag.updated", { id });
    // A queue of its own name, so the workers above do not run these jobs.
    const queue = new Queue("flag-events-options", {
      connection: { host: "127.0.0.1", port: redis.port },
      defaultJobOptions: { attempts: 2 },
    });
    queue.on("error", () => {}); // Redis is stopped on purpose below
    queues.push(queue);
    await enqueueTo(queue)(event("evt_defaults"));
    await enqueueTo(queue, { job: { attempts: 9, removeOnComplete: { age: 600 }, jobId: "ignored" } as never })(
      event("evt_given"),
    );
    const [defaults, given] = await Promise.all([
      queue.getJob(eventJobId("evt_defaults")),
      queue.getJob(eventJobId("evt_given")),
    ]);
    expect(defaults?.name).toBe("flag.updated");
    expect(defaults?.opts).toMatchObject({
      attempts: 2,
      backoff: { type: "exponential", delay: 1000 },
      removeOnComplete: { age: 86400 },
      removeOnFail: false,
    });
    expect(given?.opts).toMatchObject({ attempts: 9, removeOnComplete: { age: 600 } });
    expect(given?.id).toBe("event-evt_given");
  });

  it("keeps ids BullMQ would refuse as they are: colons, and ids that read as integers", async () => {
    const ids = ["evt:with:colons", "12345", "evt%3A"];
    for (const id of ids) expect((await post(express1, id)).status).toBe(202);
    expect((await post(fetch2, "12345")).status).toBe(202);
    await until(() => ids.every((id) => doneCount(id) >= 1), 15_000, "the odd ids to be processed");
    await sleep(300);
    expect(ids.map(doneCount)).toEqual([1, 1, 1]);
    expect(eventJobId("evt:with:colons")).toBe("event-evt%3Awith%3Acolons");
    expect(eventJobId("evt%3A")).not.toBe(eventJobId("evt:"));
  });

  it("retries a failing handler with backoff, then leaves the exhausted job in the failed set", async () => {
    // flaky_ fails twice then succeeds, with the default exponential backoff (1 s, then 2 s).
    expect((await post(express1, "flaky_1")).status).toBe(202);
    // fail_ always fails: three attempts, 100 ms apart, set for this enqueue.
    const enqueue = enqueueTo(queues[0] as Queue, { job: { attempts: 3, backoff: { type: "fixed", delay: 100 } } });
    const reply = await enqueue(createEvent("flag.updated", { id: "fail_1" }));
    expect(reply).toEqual({ status: 202 });
    const queue = queues[0] as Queue;
    await until(
      async () => (await queue.getFailed()).some((job) => job.data.id === "fail_1"),
      15_000,
      "fail_1 to fail",
    );
    const failed = await queue.getJob(eventJobId("fail_1"));
    expect([failed?.attemptsMade, failed?.failedReason]).toEqual([3, "handler failed for fail_1"]);
    await until(() => doneCount("flaky_1") === 1, 15_000, "flaky_1 to succeed on its third attempt");
    const starts = workers.flatMap((worker) => worker.lines.filter((line) => line.startsWith("start flaky_1 ")));
    expect(starts.map((line) => line.split(" ")[3]).sort()).toEqual(["0", "1", "2"]);
    // A failed job is re-run from the failed set with job.retry(), as docs/queues.md shows.
    const startsOf = () => workers.flatMap((w) => w.lines.filter((line) => line.startsWith("start fail_1 "))).length;
    expect(startsOf()).toBe(3);
    await failed?.retry();
    await until(() => startsOf() === 4, 10_000, "the retried job to run again");
  }, 40_000);

  it("answers 503 store_unavailable while Redis is down, and loses nothing once it is back", async () => {
    const ids = Array.from({ length: 30 }, (_, n) => `evt_outage_${n}`);
    const statuses: number[] = [];
    const codes = new Set<string | undefined>();
    // A sender that retries until it gets a 2xx, alternating receivers, as the service does.
    const send = async (id: string, n: number) => {
      for (let attempt = 0; attempt < 100; attempt++) {
        const answer = await post((n + attempt) % 2 ? express1 : fetch2, id);
        statuses.push(answer.status);
        if (answer.status < 300) return;
        codes.add(answer.code);
        await sleep(250);
      }
      throw new Error(`${id} was never accepted`);
    };
    const first = ids.slice(0, 10);
    await Promise.all(first.map(send));
    await redis.stop(true); // a crash, while deliveries keep arriving
    const senders = ids.slice(10).map((id, n) => send(id, n));
    await sleep(2000);
    await redis.restart();
    await Promise.all(senders);
    expect(statuses.filter((status) => status !== 202 && status !== 503)).toEqual([]);
    expect(statuses.filter((status) => status === 503).length).toBeGreaterThan(0);
    expect([...codes]).toEqual(["store_unavailable"]);
    await until(() => ids.every((id) => doneCount(id) >= 1), 30_000, "every event to be processed after the outage");
    // Nothing lost; and one job per event id.
    const jobs = await Promise.all(ids.map((id) => (queues[1] as Queue).getJob(eventJobId(id))));
    expect(jobs.map((job) => job?.data.id)).toEqual(ids);
  }, 60_000);

  it("runs the job of a worker killed mid-handler on the other worker, and loses nothing", async () => {
    expect((await post(fetch2, "slow_1")).status).toBe(202);
    const others = Array.from({ length: 10 }, (_, n) => `evt_crash_${n}`);
    await until(
      () => workers.some((worker) => worker.lines.some((l) => l.startsWith("start slow_1 "))),
      10_000,
      "slow_1",
    );
    const victim = workers.find((worker) =>
      worker.lines.some((line) => line.startsWith("start slow_1 ")),
    ) as WorkerProcess;
    const survivor = workers.find((worker) => worker !== victim) as WorkerProcess;
    await stopWorker(victim); // SIGKILL by pid, in the middle of slow_1
    expect(doneCount("slow_1")).toBe(0);
    for (const id of others) expect((await post(express1, id)).status).toBe(202);
    await until(() => survivor.lines.includes(`done slow_1 ${survivor.name}`), 20_000, "the survivor to finish slow_1");
    expect(survivor.lines.some((line) => line.startsWith(`start slow_1 ${survivor.name}`))).toBe(true);
    await until(() => others.every((id) => doneCount(id) === 1), 10_000, "the later events");
    expect(doneCount("slow_1")).toBe(1);
  }, 40_000);

  // The service sends one event, with one id, to every endpoint subscribed to it.
  // Two endpoints (an audit app and a cache app) feeding one queue must each get every event.
  it("two endpoints on one queue, each with its scope: every event is enqueued and processed once per endpoint", async () => {
    const connection = { host: "127.0.0.1", port: redis.port };
    const name = "flag-events-shared";
    const processed: string[] = [];
    const worker = processEvents({
      queue: name,
      connection,
      concurrency: 5,
      onEvent: (event, job) => void processed.push(`${job.id} ${event.id}`),
    });
    worker.on("error", () => {});
    const queue = new Queue(name, { connection });
    queue.on("error", () => {});
    queues.push(queue);
    const receivers: Server[] = [];
    try {
      for (const scope of ["audit-app", "cache-app"]) {
        // Each endpoint has two instances (Express and fetch), each with its own Queue object.
        const mine = () => {
          const own = new Queue(name, { connection });
          own.on("error", () => {});
          queues.push(own);
          return enqueueTo(own, { scope });
        };
        const app = express();
        app.post("/webhooks", webhookMiddleware({ secret, onEvent: mine() }));
        receivers.push(await listen(createServer(app)));
        receivers.push(await listen(serve(webhookHandler({ secret, onEvent: mine() }))));
      }
      const ids = Array.from({ length: 10 }, (_, n) => `evt_shared_${n}`);
      // Every event to both endpoints, twice each (once per instance), half of them at once.
      const answers = await Promise.all(
        ids.flatMap((id, n) =>
          [0, 2].map(async (first) => {
            const [a, b] = [receivers[first] as Server, receivers[first + 1] as Server];
            if (n % 2) return Promise.all([post(a, id), post(b, id)]);
            return [await post(a, id), await post(b, id)];
          }),
        ),
      );
      expect(answers.flat().map((answer) => answer.status)).toEqual(Array(40).fill(202));
      await until(() => processed.length >= 20, 20_000, "every event to be processed for both endpoints");
      await sleep(300); // time for a wrong, third run to show up
      const expected = ids.flatMap((id) => [
        `${eventJobId(id, "audit-app")} ${id}`,
        `${eventJobId(id, "cache-app")} ${id}`,
      ]);
      expect(processed.sort()).toEqual(expected.sort());
      expect(eventJobId("evt_shared_0", "audit-app")).toBe("@audit-app/event-evt_shared_0");
      // Without a scope, the queue is the scope: the second endpoint's copy adds no job.
      const event = createEvent("flag.updated", { id: "evt_unscoped" });
      await enqueueTo(queue)(event);
      await enqueueTo(queue)(event);
      expect(await queue.getJobCountByTypes("completed", "active", "waiting")).toBe(21);
    } finally {
      await Promise.all(receivers.map(close));
      await worker.close();
    }
  }, 40_000);

  // A job added by other code is checked by the receiver's own parser.
  it("fails a job whose data is not a valid event at once, without retries, and never hands it to the handler", async () => {
    const connection = { host: "127.0.0.1", port: redis.port };
    const name = "flag-events-validated";
    const seen: string[] = [];
    const router = createRouter<[job: EventJob]>()
      .on("flag.updated", (event) => void seen.push(`flag.updated ${event.id} ${typeof event.data.flag}`))
      .on("unknown", (event) => void seen.push(`unknown ${event.id} ${event.originalType}`));
    const worker = processEvents({ queue: name, connection, onEvent: router });
    worker.on("error", () => {});
    const queue = new Queue(name, { connection });
    queue.on("error", () => {});
    queues.push(queue);
    try {
      const valid = createEvent("flag.updated", { id: "evt_valid" });
      const newer = parseEvent(JSON.stringify({ ...valid, id: "evt_newer", type: "flag.archived", data: {} }));
      await enqueueTo(queue)(valid);
      await enqueueTo(queue)(newer); // a type this version does not know: kept as "unknown"
      const retries = { attempts: 5, backoff: { type: "fixed", delay: 10 } };
      const bad: [string, unknown][] = [
        ["bad_flag", { ...valid, id: "bad_flag", data: { ...valid.data, flag: 42 } }],
        ["bad_changes", { ...valid, id: "bad_changes", data: { ...valid.data, changes: [{ path: 1 }] } }],
        ["bad_id", { ...valid, id: 7 }],
        ["bad_unknown", { ...valid, id: "bad_unknown", type: "unknown", originalType: "flag.updated" }],
        ["bad_null", null],
      ];
      for (const [jobId, data] of bad) await queue.add("flag.updated", data as never, { ...retries, jobId });
      await until(
        async () => (await queue.getFailedCount()) === bad.length && (await queue.getCompletedCount()) === 2,
        15_000,
        "the invalid jobs to fail and the valid ones to complete",
      );
      await sleep(300); // time for a wrong retry to show up
      const failed = await Promise.all(bad.map(([jobId]) => queue.getJob(jobId)));
      expect(failed.map((job) => [job?.id, job?.attemptsMade, job?.failedReason])).toEqual([
        ["bad_flag", 1, "job bad_flag does not hold a valid flag-webhooks event: data.flag must be a string"],
        [
          "bad_changes",
          1,
          "job bad_changes does not hold a valid flag-webhooks event: data.changes[0].path must be a string",
        ],
        ["bad_id", 1, "job bad_id does not hold a valid flag-webhooks event: id must be a string"],
        [
          "bad_unknown",
          1,
          'job bad_unknown does not hold a valid flag-webhooks event: type is "unknown" but originalType is the known type "flag.updated"',
        ],
        ["bad_null", 1, "job bad_null does not hold a valid flag-webhooks event: body must be an object"],
      ]);
      expect(seen.sort()).toEqual(["flag.updated evt_valid string", "unknown evt_newer flag.archived"]);
    } finally {
      await worker.close();
    }
  }, 30_000);
});

describe("enqueueTo and processEvents options", () => {
  it("checks a scope like the dedupe stores do, and no event id and scope pair shares a job id with another", () => {
    const queue = { add: async () => {} } as never;
    for (const scope of ["", "a/b", "a:b", "x".repeat(101), 5]) {
      expect(() => enqueueTo(queue, { scope } as never)).toThrow(
        /option "scope" of enqueueTo must be 1-100 characters/,
      );
    }
    // Pairs that a naive separator would merge: a scope ending like an id begins, an unscoped id
    // that looks scoped, "%" and ":" in either part.
    const pairs: [string, string | undefined][] = [
      ["x", "a"],
      ["@a/event-x", undefined],
      ["a/event-x", undefined],
      ["event-x", "a"],
      ["x", "a.event-"],
      ["a.event-x", undefined],
      ["b/x", "a"],
      ["25x", "a"],
      ["a%x", undefined],
      ["x:y", "a"],
      ["x%3Ay", "a"],
    ];
    const ids = pairs.map(([id, scope]) => eventJobId(id, scope));
    expect(new Set(ids).size).toBe(pairs.length);
    for (const id of ids) expect(id).not.toContain(":");
    expect(() => eventJobId("x", "a/b")).toThrow(/"scope"/);
  });
});

describe.skipIf(!availability.available)("examples/bullmq (receiver.ts + worker.ts as their own processes)", () => {
  let redis: RedisServer;
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid as number, "SIGKILL");
    }
    await stopRedis(redis);
  });

  /** Runs an example as its README says (tsx), and resolves with its output once `ready` matches. */
  function run(
    file: string,
    env: Record<string, string>,
    ready: RegExp,
  ): Promise<{ output: () => string; match: RegExpMatchArray }> {
    const child = spawn(process.execPath, ["--import", "tsx", file], {
      cwd: root,
      env: { ...process.env, TSX_TSCONFIG_PATH: "tsconfig.test.json", ...env },
      stdio: "pipe",
    });
    children.push(child);
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk;
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk;
    });
    return new Promise((done, fail) => {
      const timer = setInterval(() => {
        const match = output.match(ready);
        if (match) {
          clearInterval(timer);
          done({ output: () => output, match });
        }
      }, 50);
      child.once("exit", (code) => {
        clearInterval(timer);
        fail(new Error(`${file} exited with ${code}:\n${output}`));
      });
    });
  }

  it("accepts a delivery with 202 and the worker processes it, typed", async () => {
    redis = await startRedis();
    const env = { WEBHOOK_SECRET: secret, REDIS_PORT: String(redis.port), PORT: "0" };
    const [receiver, worker] = await Promise.all([
      run("examples/bullmq/receiver.ts", env, /listening on http:\/\/127\.0\.0\.1:(\d+)\/webhooks/),
      run("examples/bullmq/worker.ts", env, /worker ready/),
    ]);
    const { body, headers } = await delivery(secret, { id: "evt_example_1" });
    const signature = headers["service-signature"];
    const url = `http://127.0.0.1:${receiver.match[1]}/webhooks`;
    const send = (sig: string) => fetch(url, { method: "POST", headers: { "service-signature": sig }, body });
    expect((await send(signature)).status).toBe(202);
    expect((await send(signature)).status).toBe(202); // a duplicate: no second job
    expect((await send("0".repeat(64))).status).toBe(401);
    await until(() => worker.output().includes("processed evt_example_1"), 15_000, "the example worker");
    await sleep(300);
    expect(worker.output().match(/processed evt_example_1 .*/g)).toEqual([
      "processed evt_example_1 flag.updated new-checkout (on: false → true) attempt 1",
    ]);
  }, 40_000);
});

// In this process, without worker processes.
const SECRET = "bullmq-in-process-secret";

function event(id: string, type = "flag.updated"): WebhookEvent {
  return {
    id,
    type,
    createdAt: new Date().toISOString(),
    environment: "staging",
    data: { flag: "f", changes: [], actor: { type: "user", email: "a@example.com" } },
  } as WebhookEvent;
}

async function waitFor<T>(get: () => Promise<T | undefined> | T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await get();
    if (value !== undefined) return value;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A Queue to port 1, where nothing listens: BullMQ's client keeps reconnecting, add never settles. */
function unreachableQueue(): Queue {
  const queue = new Queue("nowhere", { connection: { host: "127.0.0.1", port: 1 } });
  queue.on("error", () => {});
  return queue;
}

async function enqueueError(enqueue: (event: WebhookEvent) => Promise<unknown>, id: string): Promise<WebhookError> {
  const error = await enqueue(event(id)).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(WebhookError);
  return error as WebhookError;
}

describe("enqueueTo without Redis answering", () => {
  it("answers 503 store_unavailable, never 2xx, after the timeout given in ms, naming it in the cause", async () => {
    const queue = unreachableQueue();
    try {
      const started = Date.now();
      const error = await enqueueError(enqueueTo(queue, { timeout: 50 }), "evt_ms");
      expect([error.code, error.status, error.message]).toEqual([
        "store_unavailable",
        503,
        "the event queue is unavailable; retry later",
      ]);
      expect((error.cause as Error).message).toBe("Redis did not acknowledge the job within 50 ms");
      // Answered in time, never left hanging: the sender's retry comes later.
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await queue.close().catch(() => {});
    }
  });

  it("takes the timeout as a duration, and waits 3 s by default", async () => {
    const queue = unreachableQueue();
    try {
      const given = await enqueueError(enqueueTo(queue, { timeout: "0.1s" }), "evt_duration");
      expect((given.cause as Error).message).toBe("Redis did not acknowledge the job within 100 ms");
      const byDefault = await enqueueError(enqueueTo(queue), "evt_default");
      expect((byDefault.cause as Error).message).toBe("Redis did not acknowledge the job within 3000 ms");
    } finally {
      await queue.close().catch(() => {});
    }
  }, 10_000);

  it("answers store_unavailable with BullMQ's own error as the cause when the add fails", async () => {
    const queue = unreachableQueue();
    await queue.close().catch(() => {});
    const error = await enqueueError(enqueueTo(queue, { timeout: 2000 }), "evt_closed");
    expect(error.code).toBe("store_unavailable");
    expect((error.cause as Error).message).not.toMatch(/did not acknowledge/);
  });

  it("names the function whose scope is wrong, and checks processEvents' queue and onEvent when it is made", () => {
    const queue = unreachableQueue();
    expect(() => enqueueTo(queue, { scope: "a/b" })).toThrow(/^flag-webhooks: option "scope" of enqueueTo must be/);
    expect(() => eventJobId("x", "a b")).toThrow(/^flag-webhooks: option "scope" of eventJobId must be/);
    void queue.close().catch(() => {});
    const queueMessage = 'flag-webhooks: option "queue" must be the name of the BullMQ queue';
    for (const name of ["", 7, undefined]) {
      expect(() => processEvents({ queue: name as never, connection: {}, onEvent() {} })).toThrow(
        new TypeError(queueMessage),
      );
    }
    for (const onEvent of ["handler", undefined]) {
      expect(() => processEvents({ queue: "q", connection: {}, onEvent: onEvent as never })).toThrow(
        new TypeError('flag-webhooks: option "onEvent" must be a function'),
      );
    }
    expect(() => processEvents(undefined as never)).toThrow(new TypeError(queueMessage));
  });

  it("checks the queue and the timeout when it is made", () => {
    const queue = unreachableQueue();
    expect(() => enqueueTo(queue, { timeout: "later" })).toThrow(/"timeout"/);
    expect(() => enqueueTo({ add: async () => {} } as never, { timeout: "soon" })).toThrow(/"timeout"/);
    for (const notAQueue of [null, {}]) {
      expect(() => enqueueTo(notAQueue as never)).toThrow("flag-webhooks: enqueueTo(queue) needs a BullMQ Queue");
    }
    void queue.close().catch(() => {});
  });
});

describe.skipIf(!availability.available)("enqueueTo and processEvents on a real redis-server", () => {
  let redis: RedisServer;
  let sdk: Sdk;
  const queues: Queue[] = [];
  const connection = () => ({ host: "127.0.0.1", port: redis.port });
  const queue = (name: string, opts: Omit<QueueOptions, "connection"> = {}) => {
    const one = new Queue(name, { connection: connection(), ...opts });
    queues.push(one);
    return one;
  };

  beforeAll(async () => {
    sdk = startSdk();
    redis = await startRedis();
  }, 30_000);
  afterAll(async () => {
    await Promise.all(queues.map((one) => one.close().catch(() => {})));
    await stopRedis(redis);
    await sdk?.shutdown();
  });

  it("adds each event as a job named after its type, under its job id, with the default options, and answers 202", async () => {
    const q = queue("defaults");
    const reply = await enqueueTo(q)(event("evt:1%", "flag.deleted"));
    expect(reply).toEqual({ status: 202 });
    const job = (await q.getJob("event-evt%3A1%25")) as Job;
    expect([job.name, job.id, job.data.id]).toEqual(["flag.deleted", "event-evt%3A1%25", "evt:1%"]);
    expect(job.opts).toMatchObject({
      attempts: 5,
      backoff: { type: "exponential", delay: 1000 },
      removeOnComplete: { age: 86_400 },
      removeOnFail: false,
    });
    // No telemetry option: nothing but the event travels with the job.
    expect(job.opts.telemetry).toBeUndefined();
  });

  it("puts the queue's defaultJobOptions over the defaults, and the given job options over both, but never a jobId", async () => {
    const q = queue("layered", { defaultJobOptions: { attempts: 2, priority: 3 } });
    await enqueueTo(q, { scope: "audit-app", job: { priority: 7, jobId: "mine" } as never })(event("evt_layered"));
    const job = (await q.getJob(eventJobId("evt_layered", "audit-app"))) as Job;
    expect(job.id).toBe("@audit-app/event-evt_layered");
    expect(job.opts).toMatchObject({ attempts: 2, priority: 7, removeOnFail: false });
    expect(await q.getJob("mine")).toBeUndefined();
  });

  it("carries the active trace context in opts.telemetry.metadata, keeping the job's own telemetry options", async () => {
    const q = queue("traced");
    const telemetry = openTelemetry();
    const span = trace.getTracer("test").startSpan("parent");
    const sent = event("evt_traced");
    await context.with(trace.setSpan(context.active(), span), () =>
      enqueueTo(q, { telemetry, job: { telemetry: { omitContext: true } } })(sent),
    );
    span.end();
    const job = (await q.getJob("event-evt_traced")) as Job;
    expect(job.opts.telemetry?.omitContext).toBe(true);
    const carrier = JSON.parse(job.opts.telemetry?.metadata as string);
    expect(carrier.traceparent).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
    expect(job.data).toEqual(sent);
    // Outside any span there is no context to carry: the options are left as they are.
    await enqueueTo(q, { telemetry })(event("evt_untraced"));
    expect(((await q.getJob("event-evt_untraced")) as Job).opts.telemetry).toBeUndefined();
  });

  it("hands the worker's onEvent the validated event and its job, and a fetch receiver's delivery reaches it", async () => {
    const q = queue("through");
    const seen: string[] = [];
    const worker = processEvents({
      queue: "through",
      connection: connection(),
      onEvent: (e, job) => void seen.push(`${job.id} ${e.type} ${e.environment}`),
    });
    worker.on("error", () => {});
    try {
      const handler = webhookHandler({ secret: SECRET, onEvent: enqueueTo(q) });
      const response = await handler(await signedRequest({ secret: SECRET, event: event("evt_through") }));
      expect(response.status).toBe(202);
      expect(await waitFor(() => seen[0], "the job")).toBe("event-evt_through flag.updated staging");
      // The worker's options are BullMQ's: no telemetry of ours is passed on.
      expect(worker.opts.telemetry).toBeUndefined();
    } finally {
      await worker.close();
    }
  });

  it("fails a job with type unknown at once, with the reason, when originalType is missing or not a string", async () => {
    const q = queue("unknown-types");
    const seen: string[] = [];
    const worker = processEvents({
      queue: "unknown-types",
      connection: connection(),
      onEvent: (e) => void seen.push(`${e.id} ${e.type}`),
    });
    worker.on("error", () => {});
    try {
      const base = event("x");
      await q.add("unknown", { ...base, id: "no_original", type: "unknown" }, { jobId: "no_original", attempts: 3 });
      await q.add("unknown", { ...base, id: "num_original", type: "unknown", originalType: 7 }, { jobId: "num" });
      await q.add(
        "unknown",
        { ...base, id: "known", type: "unknown", originalType: "flag.deleted" },
        { jobId: "known" },
      );
      await q.add("unknown", null as never, { jobId: "null" });
      await q.add(
        "unknown",
        { ...base, id: "kept", type: "unknown", originalType: "flag.archived" },
        { jobId: "kept" },
      );
      const failed = await waitFor(async () => {
        const jobs = await q.getFailed();
        return jobs.length === 4 ? jobs : undefined;
      }, "four failed jobs");
      const reason = "does not hold a valid flag-webhooks event:";
      expect(failed.map((job) => [job.id, job.attemptsMade, job.failedReason]).sort()).toEqual([
        ["known", 1, `job known ${reason} type is "unknown" but originalType is the known type "flag.deleted"`],
        ["no_original", 1, `job no_original ${reason} originalType must be a string`],
        ["null", 1, `job null ${reason} body must be an object`],
        ["num", 1, `job num ${reason} originalType must be a string`],
      ]);
      expect(await waitFor(() => seen[0], "the kept job")).toBe("kept unknown");
    } finally {
      await worker.close();
    }
  });

  it("passes BullMQ's own telemetry on to the Worker, and keeps ours to itself", async () => {
    queue("options");
    // BullMQ's Telemetry interface (what bullmq-otel implements), recording nothing.
    const span = {
      setSpanOnContext: (c: unknown) => c,
      setAttribute() {},
      setAttributes() {},
      addEvent() {},
      recordException() {},
      end() {},
    };
    const theirs = {
      tracer: { startSpan: () => span },
      contextManager: {
        with: (_c: unknown, fn: () => unknown) => fn(),
        active: () => ({}),
        getMetadata: () => "",
        fromMetadata: (c: unknown) => c,
      },
    } as unknown as BullTelemetry;
    const passed = processEvents({
      queue: "options",
      connection: connection(),
      autorun: false,
      onEvent() {},
      telemetry: theirs,
    });
    const ours = processEvents({
      queue: "options",
      connection: connection(),
      autorun: false,
      onEvent() {},
      telemetry: openTelemetry(),
    });
    try {
      expect(passed.opts.telemetry).toBe(theirs);
      expect(ours.opts.telemetry).toBeUndefined();
      expect(passed.opts.autorun).toBe(false);
    } finally {
      await Promise.all([passed.close(), ours.close()]);
    }
  });

  it("runs a job whose trace metadata is not JSON in a span of a new trace, and fields that are not text are no context", async () => {
    const q = queue("bad-metadata");
    sdk.spans.reset();
    const worker = processEvents({
      queue: "bad-metadata",
      connection: connection(),
      telemetry: openTelemetry(),
      onEvent() {},
    });
    worker.on("error", () => {});
    try {
      const parent = trace.getTracer("test").startSpan("elsewhere");
      const carrier: Record<string, string> = {};
      propagation.inject(trace.setSpan(context.active(), parent), carrier);
      parent.end();
      await q.add("flag.updated", event("evt_not_json"), { jobId: "not-json", telemetry: { metadata: "{not json" } });
      await q.add("flag.updated", event("evt_numbers"), {
        jobId: "numbers",
        telemetry: { metadata: JSON.stringify({ traceparent: 42 }) },
      });
      await q.add("flag.updated", event("evt_linked"), {
        jobId: "linked",
        telemetry: { metadata: JSON.stringify({ ...carrier, extra: { nested: true } }) },
      });
      // A tracestate that is not text is dropped; the traceparent beside it still links the trace.
      await q.add("flag.updated", event("evt_state"), {
        jobId: "state",
        telemetry: { metadata: JSON.stringify({ ...carrier, tracestate: ["vendor=1"] }) },
      });
      // A job added without any telemetry option (by other code) runs in a new trace.
      await q.add("flag.updated", event("evt_plain"), { jobId: "plain" });
      const spans = await sdk.ended("flag-webhooks.process", 5);
      const byJob = new Map(spans.map((span) => [span.attributes["messaging.message.id"], span]));
      for (const id of ["not-json", "numbers"]) {
        expect(byJob.get(id)?.parentSpanContext).toBeUndefined();
        expect(byJob.get(id)?.spanContext().traceId).not.toBe(parent.spanContext().traceId);
      }
      expect(byJob.get("linked")?.spanContext().traceId).toBe(parent.spanContext().traceId);
      expect(byJob.get("linked")?.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
      expect(byJob.get("state")?.spanContext().traceId).toBe(parent.spanContext().traceId);
      expect(byJob.get("state")?.spanContext().traceState).toBeUndefined();
      expect(byJob.get("plain")?.parentSpanContext).toBeUndefined();
    } finally {
      await worker.close();
    }
  });
});
