#!/usr/bin/env node
// `npm run soak:dedupe` (or `npm run soak -- --dedupe-redis`): the fleet soak. 100,000 valid
// deliveries at 50 connections across TWO receiver processes (scripts/soak-dedupe-server.mjs)
// sharing one redis-server that this script starts on a free loopback port and stops by pid.
// Every delivery is sent twice, to different receivers: a quarter of the pairs at the same
// moment, the rest one after the other; every 100th is preceded by a forged copy of the same id.
// Like a real sender, a 409 delivery_in_progress or 503 store_unavailable is retried (after a
// short sleep, not the literal Retry-After seconds). Checks: each id handled exactly once across
// both receivers, 0 lost, 0 non-2xx after retries, forged copies 401; reports the retries, Redis
// round trips per delivery (INFO commandstats) and each receiver's RSS growth.
// SOAK_DELIVERIES and SOAK_CONCURRENCY change the size; a hard time limit applies.
import { fork } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { soakEvent, startRedisServer } from "./soak-lib.mjs";

const TOTAL = Number(process.env.SOAK_DELIVERIES ?? 100_000);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 50);
const WARMUP = Math.min(10_000, Math.floor(TOTAL / 10));
const HARD_LIMIT_MS = 15 * 60 * 1000;
const RETRY_SLEEP_MS = 10; // a real sender waits Retry-After seconds; the soak cannot
const MAX_RETRIES = 500;
const secret = randomBytes(16).toString("hex");
const sign = (body, key = secret) => createHmac("sha256", key).update(body).digest("hex");

// ----------------------------------------------------------------------------- redis-server

const redis = await startRedisServer().catch((error) => {
  console.error(`soak: ${error.message}`);
  process.exit(1);
});
const redisUrl = redis.url;
const children = [];
function stopAll() {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  redis.kill();
}
process.on("exit", stopAll);
const timer = setTimeout(() => {
  console.error("soak: hard time limit reached, stopping");
  process.exit(1);
}, HARD_LIMIT_MS);

// -------------------------------------------------------------------------------- receivers

function startReceiver(client) {
  const child = fork(new URL("./soak-dedupe-server.mjs", import.meta.url), [], {
    env: {
      ...process.env,
      SOAK_SECRET: secret,
      SOAK_DELIVERIES: String(TOTAL),
      SOAK_REDIS_URL: redisUrl,
      SOAK_CLIENT: client,
    },
    execArgv: ["--expose-gc"],
  });
  children.push(child);
  const ask = (message, key) =>
    new Promise((resolve) => {
      const listener = (reply) => {
        if (key in reply) {
          child.off("message", listener);
          resolve(reply);
        }
      };
      child.on("message", listener);
      child.send(message);
    });
  return new Promise((resolve, reject) => {
    child.once("message", ({ port }) =>
      resolve({ client, child, ask, port, agent: new Agent({ keepAlive: true, maxSockets: CONCURRENCY / 2 }) }),
    );
    child.once("exit", (code) => reject(new Error(`receiver (${client}) exited early with ${code}`)));
  });
}
const receivers = await Promise.all([startReceiver("ioredis"), startReceiver("node-redis")]);

// ------------------------------------------------------------------------------ the sender

function post(receiver, body, signature) {
  return new Promise((resolve) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: receiver.port,
        path: "/webhooks",
        method: "POST",
        agent: receiver.agent,
        headers: { "content-type": "application/json", "service-signature": signature, "content-length": body.length },
      },
      (res) => {
        res.resume();
        res.on("end", () =>
          resolve({ status: res.statusCode, duplicate: res.headers["webhook-duplicate"] === "true" }),
        );
      },
    );
    req.on("error", () => resolve({ status: 0, duplicate: false }));
    req.end(body);
  });
}

const retries = {};
let retriedDeliveries = 0;
/** Sends one copy as a sender would: 409 and 503 are retried after a short sleep. */
async function send(receiver, body, signature) {
  for (let attempt = 0; ; attempt++) {
    const answer = await post(receiver, body, signature);
    if ((answer.status !== 409 && answer.status !== 503) || attempt >= MAX_RETRIES) {
      if (attempt > 0) retriedDeliveries++;
      return answer;
    }
    retries[answer.status] = (retries[answer.status] ?? 0) + 1;
    await sleep(RETRY_SLEEP_MS);
  }
}

function delivery(n) {
  const body = soakEvent(n);
  return { body, signature: sign(body) };
}

const finals = {}; // final status of every valid copy, after retries
const forged = {};
let ranAnswers = 0; // 204 without webhook-duplicate: the copy whose handler ran
let duplicateAnswers = 0;
let concurrentPairs = 0;
let next = 0;
const rssAfterWarmup = [0, 0];
// The V8 heap in use after a full collection: RSS keeps pages the heap no longer uses, so a
// growth of RSS alone under a loaded machine does not tell a leak from an unreturned page.
const heapAfterWarmup = [0, 0];
const started = Date.now();
async function worker() {
  while (next < TOTAL) {
    const n = next++;
    const { body, signature } = delivery(n);
    const [first, second] = n % 2 ? [receivers[0], receivers[1]] : [receivers[1], receivers[0]];
    if (n % 100 === 0) {
      const { status } = await post(first, body, sign(body, "not-the-secret"));
      forged[status] = (forged[status] ?? 0) + 1;
    }
    let answers;
    if (n % 4 === 1) {
      concurrentPairs++;
      answers = await Promise.all([send(first, body, signature), send(second, body, signature)]);
    } else {
      answers = [await send(first, body, signature), await send(second, body, signature)];
    }
    for (const { status, duplicate } of answers) {
      finals[status] = (finals[status] ?? 0) + 1;
      if (status === 204) {
        if (duplicate) duplicateAnswers++;
        else ranAnswers++;
      }
    }
    if (n === WARMUP) {
      for (const [i, receiver] of receivers.entries()) {
        await receiver.ask("gc", "gc");
        const warm = await receiver.ask("stats", "rss");
        rssAfterWarmup[i] = warm.rss;
        heapAfterWarmup[i] = warm.heapUsed;
      }
    }
  }
}

const inspector = new Redis(redisUrl);
const commandStats = async () => {
  const info = await inspector.info("commandstats");
  return Object.fromEntries(
    [...info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map(([, name, calls]) => [name, Number(calls)]),
  );
};
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
const seconds = (Date.now() - started) / 1000;
const commands = await commandStats();
const keys = await inspector.dbsize();
inspector.disconnect();

const stats = [];
for (const receiver of receivers) {
  await receiver.ask("gc", "gc");
  stats.push(await receiver.ask("stats", "rss"));
  receiver.child.send("exit");
  receiver.agent.destroy();
}
clearTimeout(timer);

// ------------------------------------------------------------------------------------ report

const handled = new Uint16Array(TOTAL);
for (const s of stats) {
  const counts = Buffer.from(s.counts, "base64");
  for (let i = 0; i < TOTAL; i++) handled[i] += counts[i];
}
let once = 0;
let lost = 0;
let twice = 0;
for (const n of handled) {
  if (n === 1) once++;
  else if (n === 0) lost++;
  else twice++;
}
const foreign = stats.reduce((sum, s) => sum + s.foreign, 0);
const nonOk = Object.entries(finals)
  .filter(([status]) => status !== "204")
  .reduce((sum, [, n]) => sum + n, 0);
const retryCount = Object.values(retries).reduce((a, b) => a + b, 0);
const sets = commands.set ?? 0;
const evals = commands.eval ?? 0;
// Every claim is one SET NX GET, every completion one SET: 2 per handled id, 1 per duplicate
// copy and 1 per copy told to retry (409). A forged copy costs none.
const expectedSets = 2 * once + duplicateAnswers + (retries[409] ?? 0);

console.log(
  `valid deliveries: ${TOTAL}, each sent twice (${2 * TOTAL} copies; ${concurrentPairs} pairs at the same moment), ` +
    `at ${CONCURRENCY} connections to two receivers (ioredis, node-redis) on one redis-server, in ${seconds.toFixed(1)}s ` +
    `(${Math.round((2 * TOTAL + retryCount) / seconds)} req/s)`,
);
console.log(`final answers to the valid copies after retries: ${JSON.stringify(finals)} (non-2xx: ${nonOk})`);
console.log(
  `answers: ${ranAnswers} handled, ${duplicateAnswers} "webhook-duplicate: true"; sender retries: ${retryCount} ` +
    `${JSON.stringify(retries)} over ${retriedDeliveries} copies`,
);
console.log(
  `event ids handled: exactly once ${once} of ${TOTAL}, lost ${lost}, more than once ${twice}, unexpected ids ${foreign}`,
);
console.log(`forged copies (wrong secret, same id, sent first): ${JSON.stringify(forged)}`);
console.log(
  `redis commands: SET ${sets} (expected ${expectedSets}: 2 per handled id + 1 per duplicate or retried copy), ` +
    `EVAL (release) ${evals}, keys left ${keys}; round trips per handled delivery 2, per duplicate 1`,
);
for (const [i, s] of stats.entries()) {
  const growth = (s.rss - rssAfterWarmup[i]) / 1048576;
  console.log(
    `receiver ${i} (${receivers[i].client}) RSS: ${(rssAfterWarmup[i] / 1048576).toFixed(1)} MB after ${WARMUP} warm-up deliveries, ` +
      `${(s.rss / 1048576).toFixed(1)} MB at the end (growth ${growth.toFixed(1)} MB, limit 20 MB); ` +
      `heap in use after GC ${(heapAfterWarmup[i] / 1048576).toFixed(1)} → ${(s.heapUsed / 1048576).toFixed(1)} MB; ` +
      `store errors reported: ${s.reported.length}${s.reported.length ? ` ${JSON.stringify(s.reported.slice(0, 3))}` : ""}`,
  );
}
const memoryChecked = TOTAL >= 50_000;
if (!memoryChecked) console.log("memory check: not enforced below 50,000 deliveries (warm-up too short)");
const growths = stats.map((s, i) => (s.rss - rssAfterWarmup[i]) / 1048576);
const ok =
  nonOk === 0 &&
  once === TOTAL &&
  lost === 0 &&
  twice === 0 &&
  foreign === 0 &&
  ranAnswers === TOTAL &&
  duplicateAnswers === TOTAL &&
  Object.keys(forged).every((status) => status === "401") &&
  sets === expectedSets &&
  evals === 0 &&
  stats.every((s) => s.reported.length === 0) &&
  (!memoryChecked || growths.every((g) => g < 20));
console.log(ok ? "soak (dedupe on Redis): passed" : "soak (dedupe on Redis): FAILED");
process.exit(ok ? 0 : 1);
