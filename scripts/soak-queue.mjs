#!/usr/bin/env node
// `npm run soak:queue`: the queue hand-off under load (issue 11). 100,000 signed deliveries at 50
// keep-alive connections into two receiver processes, three times over:
//   none    the receivers answer 204 at once (the no-handler baseline)
//   inline  a 20 ms handler runs in the request, then 204
//   queue   enqueueTo: 202 once Redis has the job; two worker processes run the 20 ms handler
//           at the same time, on the same machine
//   queue-apart  the same, but the workers start once the load is over: the receivers' figures
//           as with workers on other machines (here every process shares one machine's cores)
// It reports the receivers' req/s and latency (p50, p99, max) per run, how long the workers took
// to drain the queue, and checks every event was processed exactly once. Loopback only; starts
// its own redis-server (AOF, appendfsync everysec) and stops everything it started.
// SOAK_DELIVERIES, SOAK_CONCURRENCY, SOAK_HANDLER_MS and SOAK_RUNS (e.g. "queue") change the size.
import { fork } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import { soakEvent, startRedisServer } from "./soak-lib.mjs";

const TOTAL = Number(process.env.SOAK_DELIVERIES ?? 100_000);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 50);
const HANDLER_MS = Number(process.env.SOAK_HANDLER_MS ?? 20);
const RUNS = (process.env.SOAK_RUNS ?? "none,inline,queue,queue-apart").split(",");
const HARD_LIMIT_MS = 20 * 60 * 1000;
const secret = randomBytes(16).toString("hex");
const here = (file) => new URL(file, import.meta.url);

const children = new Set();
const hardLimit = setTimeout(() => {
  console.error("soak:queue: hard time limit reached, stopping");
  for (const child of children) child.kill("SIGKILL");
  process.exit(1);
}, HARD_LIMIT_MS);

/** A child process that answers messages; `ask` resolves with the first reply that has `key`. */
function start(file, env) {
  const child = fork(here(file), [], { env: { ...process.env, ...env } });
  children.add(child);
  const first = new Promise((resolve, reject) => {
    child.once("message", resolve);
    child.once("exit", (code) => reject(new Error(`${file} exited with ${code}`)));
  });
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
  const stop = async () => {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.send("exit");
    await exited;
    children.delete(child);
  };
  return { child, first, ask, stop };
}

function delivery(n) {
  const body = soakEvent(n);
  return { body, signature: createHmac("sha256", secret).update(body).digest("hex") };
}

function post(port, agent, { body, signature }) {
  return new Promise((resolve) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/webhooks",
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "service-signature": signature, "content-length": body.length },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      },
    );
    req.on("error", () => resolve(0));
    req.end(body);
  });
}

/** Sends TOTAL deliveries at CONCURRENCY connections, half to each receiver; returns the figures. */
async function load(ports) {
  const agents = ports.map(() => new Agent({ keepAlive: true, maxSockets: Math.ceil(CONCURRENCY / ports.length) }));
  const latencies = new Float64Array(TOTAL);
  const statuses = {};
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, lane) => {
      const target = lane % ports.length;
      while (next < TOTAL) {
        const n = next++;
        const message = delivery(n);
        const sent = performance.now();
        const status = await post(ports[target], agents[target], message);
        latencies[n] = performance.now() - sent;
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  for (const agent of agents) agent.destroy();
  latencies.sort();
  const at = (q) => latencies[Math.min(TOTAL - 1, Math.floor(q * TOTAL))];
  return { seconds, rps: TOTAL / seconds, p50: at(0.5), p99: at(0.99), max: latencies[TOTAL - 1], statuses };
}

const figures = {};
let processed;
let ok = true;
for (const mode of RUNS) {
  const queued = mode.startsWith("queue");
  const redis = queued ? await startRedisServer({ appendonly: true }) : undefined;
  // A hard-limit exit must not leave it running.
  const killRedis = () => redis?.kill();
  process.once("exit", killRedis);
  const env = {
    SOAK_MODE: queued ? "queue" : mode,
    SOAK_SECRET: secret,
    SOAK_HANDLER_MS: String(HANDLER_MS),
    SOAK_DELIVERIES: String(TOTAL),
    SOAK_REDIS_PORT: String(redis?.port ?? 0),
  };
  const receivers = [start("./soak-queue-receiver.mjs", env), start("./soak-queue-receiver.mjs", env)];
  const ports = (await Promise.all(receivers.map((r) => r.first))).map((m) => m.port);
  const startWorkers = async () => {
    const started = [start("./soak-queue-worker.mjs", env), start("./soak-queue-worker.mjs", env)];
    await Promise.all(started.map((w) => w.first));
    return started;
  };
  let workers = mode === "queue" ? await startWorkers() : [];

  const result = await load(ports);
  if (mode === "queue-apart") workers = await startWorkers();
  figures[mode] = result;
  const expected = queued ? "202" : "204";
  const wrong = Object.entries(result.statuses).filter(([status]) => status !== expected);
  if (wrong.length > 0) ok = false;
  console.log(
    `${mode.padEnd(11)} ${Math.round(result.rps)} req/s, p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms, ` +
      `max ${result.max.toFixed(1)} ms (${TOTAL} deliveries in ${result.seconds.toFixed(1)} s; answers ${JSON.stringify(result.statuses)})`,
  );

  if (queued) {
    // The workers drain what the receivers accepted; every id must be completed exactly once.
    // (For queue-apart, the drain time is the whole backlog's: the workers started just now.)
    const drainStarted = performance.now();
    const totals = new Uint8Array(TOTAL);
    let foreign = 0;
    for (;;) {
      totals.fill(0);
      foreign = 0;
      for (const worker of workers) {
        const reply = await worker.ask("counts", "counts");
        const counts = new Uint8Array(Buffer.from(reply.counts, "base64"));
        for (let i = 0; i < TOTAL; i++) totals[i] += counts[i];
        foreign += reply.foreign;
      }
      if (totals.every((n) => n > 0) || performance.now() - drainStarted > 10 * 60 * 1000) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const once = totals.filter((n) => n === 1).length;
    const missing = totals.filter((n) => n === 0).length;
    const twice = totals.filter((n) => n > 1).length;
    processed = { once, missing, twice, foreign, drainAfterLoad: (performance.now() - drainStarted) / 1000 };
    console.log(
      `${mode.padEnd(11)} workers: ${once} of ${TOTAL} events processed exactly once, ${twice} more than once, ${missing} missing, ` +
        `${foreign} unexpected; queue drained ${processed.drainAfterLoad.toFixed(1)} s after the last delivery was answered`,
    );
    if (once !== TOTAL || foreign !== 0) ok = false;
  }
  await Promise.all([...receivers, ...workers].map((c) => c.stop()));
  await redis?.stop();
  process.off("exit", killRedis);
}
clearTimeout(hardLimit);

if (figures.none && figures.inline && figures.queue) {
  console.log("\n| receivers (2 processes, 50 connections) | req/s | p50 | p99 | max |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  const row = (name, f) =>
    `| ${name} | ${Math.round(f.rps)} | ${f.p50.toFixed(1)} ms | ${f.p99.toFixed(1)} ms | ${f.max.toFixed(1)} ms |`;
  console.log(row("no handler (baseline)", figures.none));
  console.log(row(`${HANDLER_MS} ms handler inline`, figures.inline));
  console.log(row(`enqueueTo, ${HANDLER_MS} ms handler in 2 workers running meanwhile`, figures.queue));
  if (figures["queue-apart"]) {
    console.log(row(`enqueueTo, ${HANDLER_MS} ms handler in 2 workers started after the load`, figures["queue-apart"]));
  }
}
console.log(ok ? "soak:queue: passed" : "soak:queue: FAILED");
process.exit(ok ? 0 : 1);
