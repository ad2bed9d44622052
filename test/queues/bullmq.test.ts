import { type ChildProcess, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { Queue } from "bullmq";
import express from "express";
import { createRouter, parseEvent, WebhookError } from "flag-webhooks";
import { type EventJob, enqueueTo, eventJobId, processEvents } from "flag-webhooks/bullmq";
import { webhookMiddleware } from "flag-webhooks/express";
import { webhookHandler } from "flag-webhooks/fetch";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "../../examples/fetch-node.js";
import { close, listen } from "../support/http.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// The queue hand-off end to end (issue 11), on a real redis-server and real BullMQ: two receiver
// instances (Express and fetch) each with its own Queue, and two worker processes.
const root = resolve(import.meta.dirname, "../..");
const secret = "bullmq-test-secret";
const availability = redisAvailability();
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

function delivery(id: string): { body: string; signature: string } {
  const body = JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "production",
    data: {
      flag: "new-checkout",
      changes: [{ path: "on", from: false, to: true }],
      actor: { type: "user", email: "dana@example.com" },
    },
  });
  return { body, signature: createHmac("sha256", secret).update(body).digest("hex") };
}

async function post(server: Server, id: string): Promise<{ status: number; code?: string }> {
  const { port } = server.address() as AddressInfo;
  const { body, signature } = delivery(id);
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", "service-signature": signature },
    body,
  });
  const text = await response.text();
  return { status: response.status, code: text ? JSON.parse(text).error?.code : undefined };
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
    const event = (id: string) => JSON.parse(delivery(id).body);
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
    const reply = await enqueue(JSON.parse(delivery("fail_1").body));
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

  // Issue 15 item 3: the service sends one event, with one id, to every endpoint subscribed to it.
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
      const event = JSON.parse(delivery("evt_unscoped").body);
      await enqueueTo(queue)(event);
      await enqueueTo(queue)(event);
      expect(await queue.getJobCountByTypes("completed", "active", "waiting")).toBe(21);
    } finally {
      await Promise.all(receivers.map(close));
      await worker.close();
    }
  }, 40_000);

  // Issue 15 item 12: a job added by other code is checked by the receiver's own parser.
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
      const valid = JSON.parse(delivery("evt_valid").body);
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
  it("refuses what is not a queue, a queue name or a handler, when created", () => {
    expect(() => enqueueTo({} as Queue)).toThrow(/needs a BullMQ Queue/);
    expect(() => enqueueTo({ add: async () => {} } as never, { timeout: "soon" })).toThrow(/"timeout"/);
    expect(() => processEvents({ queue: "", connection: {}, onEvent: () => {} })).toThrow(/"queue"/);
    expect(() => processEvents({ queue: "q", connection: {}, onEvent: undefined as never })).toThrow(/"onEvent"/);
  });

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

  it("answers 503 store_unavailable, never 2xx, when Redis does not acknowledge in time", async () => {
    // Nothing listens on port 1: BullMQ's client keeps reconnecting and queue.add never settles.
    const queue = new Queue("flag-events", { connection: { host: "127.0.0.1", port: 1 } });
    queue.on("error", () => {});
    try {
      const started = Date.now();
      const error = await enqueueTo(queue, { timeout: 300 })(JSON.parse(delivery("evt_nowhere").body)).catch(
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(WebhookError);
      expect([(error as WebhookError).code, (error as WebhookError).status]).toEqual(["store_unavailable", 503]);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await queue.close().catch(() => {});
    }
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
    const { body, signature } = delivery("evt_example_1");
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
