#!/usr/bin/env node
// `npm run soak:queue`: the queue hand-off under load. 100,000 signed deliveries at 50
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
//
// Pinned (`npm run soak:queue -- --pin`, or SOAK_PIN=1): the design measured as two
// machines would run it. With `taskset`, the two receivers run on CPU 0 and nothing else does;
// the workers, redis-server and this process (the load generator: the senders) share CPU 1. The
// load generator goes with the workers, not the receivers, so it never takes CPU from what is
// measured; in the run with the workers busy it competes with them and Redis, which can only
// make the hand-off's Redis round trip slower (the receivers' figure errs on the pessimistic
// side). Every process's affinity is read back from /proc and printed before each run.
// SOAK_PIN_RECEIVERS and SOAK_PIN_OTHERS (taskset CPU lists, default "0" and "1") move them.
import { fork, spawnSync } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
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

const PIN = process.argv.includes("--pin") || (Boolean(process.env.SOAK_PIN) && process.env.SOAK_PIN !== "0");
const RECEIVER_CPUS = process.env.SOAK_PIN_RECEIVERS ?? "0";
const OTHER_CPUS = process.env.SOAK_PIN_OTHERS ?? "1";

/** The CPUs a process (all of its threads) may run on, as /proc shows them: "0", "1", "0-1". */
function affinity(pid) {
  const lists = new Set();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let status;
    try {
      status = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
    } catch {
      continue; // the thread ended meanwhile
    }
    lists.add(/^Cpus_allowed_list:\s*(\S+)/m.exec(status)?.[1] ?? "?");
  }
  return [...lists].join(" + ");
}

/** "0-2,5" → [0, 1, 2, 5]. */
function cpuList(list) {
  return list.split(",").flatMap((part) => {
    const [from, to = from] = part.split("-").map(Number);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
}

if (PIN) {
  const version = spawnSync("taskset", ["--version"], { encoding: "utf8" });
  if (version.error || version.status !== 0) {
    console.error("soak:queue --pin needs taskset (util-linux): apt-get install -y util-linux");
    process.exit(2);
  }
  const allowed = new Set(cpuList(affinity(process.pid).split(" + ")[0]));
  const wanted = [...cpuList(RECEIVER_CPUS), ...cpuList(OTHER_CPUS)];
  if (
    wanted.some((cpu) => !allowed.has(cpu)) ||
    cpuList(RECEIVER_CPUS).some((cpu) => cpuList(OTHER_CPUS).includes(cpu))
  ) {
    console.error(
      `soak:queue --pin: receivers on CPU ${RECEIVER_CPUS} and the rest on CPU ${OTHER_CPUS} must be distinct CPUs this ` +
        `process may use (it may use ${affinity(process.pid)}); set SOAK_PIN_RECEIVERS and SOAK_PIN_OTHERS`,
    );
    process.exit(2);
  }
  // The load generator: this process, every thread of it; the children it forks are pinned
  // explicitly below, so they do not inherit this.
  const pinned = spawnSync("taskset", ["-a", "-p", "-c", OTHER_CPUS, String(process.pid)], { encoding: "utf8" });
  if (pinned.status !== 0) {
    console.error(`soak:queue --pin: taskset failed: ${pinned.stderr.trim()}`);
    process.exit(2);
  }
  console.log(
    `soak:queue pinned (${version.stdout.trim()}): receivers on CPU ${RECEIVER_CPUS}; workers, redis-server and the ` +
      `load generator on CPU ${OTHER_CPUS}`,
  );
}

const children = new Set();
const hardLimit = setTimeout(() => {
  console.error("soak:queue: hard time limit reached, stopping");
  for (const child of children) child.kill("SIGKILL");
  process.exit(1);
}, HARD_LIMIT_MS);

/**
 * A child process that answers messages; `ask` resolves with the first reply that has `key`.
 * `cpus` (pinned mode): started as `taskset -c <cpus> node <file>`, so every thread of it is
 * pinned from its first instruction.
 */
function start(file, env, cpus) {
  const pinning = PIN && cpus !== undefined ? { execPath: "taskset", execArgv: ["-c", cpus, process.execPath] } : {};
  const child = fork(here(file), [], { env: { ...process.env, ...env }, ...pinning });
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
  const redis = queued ? await startRedisServer({ appendonly: true, ...(PIN ? { cpus: OTHER_CPUS } : {}) }) : undefined;
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
  const receivers = [
    start("./soak-queue-receiver.mjs", env, RECEIVER_CPUS),
    start("./soak-queue-receiver.mjs", env, RECEIVER_CPUS),
  ];
  const ports = (await Promise.all(receivers.map((r) => r.first))).map((m) => m.port);
  const startWorkers = async () => {
    const started = [
      start("./soak-queue-worker.mjs", env, OTHER_CPUS),
      start("./soak-queue-worker.mjs", env, OTHER_CPUS),
    ];
    await Promise.all(started.map((w) => w.first));
    return started;
  };
  let workers = mode === "queue" ? await startWorkers() : [];
  /** Pinned mode: prints where each process may run, read back from /proc, and fails on a mismatch. */
  const checkPinning = (processes) => {
    if (!PIN) return;
    const lines = processes.map(([name, pid, expected]) => {
      const actual = affinity(pid);
      if (PIN && actual !== expected) {
        console.error(`soak:queue --pin: ${name} (pid ${pid}) may run on CPU ${actual}, not ${expected}`);
        ok = false;
      }
      return `${name} ${pid}: CPU ${actual}`;
    });
    console.log(`${mode.padEnd(11)} affinity: ${lines.join("; ")}`);
  };
  const placement = [
    ["load generator", process.pid, OTHER_CPUS],
    ...receivers.map((r, i) => [`receiver ${i + 1}`, r.child.pid, RECEIVER_CPUS]),
    ...workers.map((w, i) => [`worker ${i + 1}`, w.child.pid, OTHER_CPUS]),
    ...(redis ? [["redis-server", redis.pid, OTHER_CPUS]] : []),
  ];
  checkPinning(placement);

  // CPU time used during the load, in CPUs (1.0 = one core busy all along): tells whether the
  // receivers were saturated and whether the load generator, not the receivers, set the pace.
  const cpuTime = async () => {
    const replies = await Promise.all(receivers.map((r) => r.ask("cpu", "cpu")));
    const own = process.cpuUsage();
    return { receivers: replies.reduce((sum, r) => sum + r.cpu.user + r.cpu.system, 0), sender: own.user + own.system };
  };
  const cpuBefore = await cpuTime();
  const result = await load(ports);
  const cpuAfter = await cpuTime();
  const busy = (key) => (cpuAfter[key] - cpuBefore[key]) / 1e6 / result.seconds;
  if (mode === "queue-apart") {
    workers = await startWorkers();
    checkPinning(workers.map((w, i) => [`worker ${i + 1}`, w.child.pid, OTHER_CPUS]));
  }
  figures[mode] = result;
  const expected = queued ? "202" : "204";
  const wrong = Object.entries(result.statuses).filter(([status]) => status !== expected);
  if (wrong.length > 0) ok = false;
  console.log(
    `${mode.padEnd(11)} ${Math.round(result.rps)} req/s, p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms, ` +
      `max ${result.max.toFixed(1)} ms (${TOTAL} deliveries in ${result.seconds.toFixed(1)} s; answers ${JSON.stringify(result.statuses)}); ` +
      `CPU used: receivers ${busy("receivers").toFixed(2)}, load generator ${busy("sender").toFixed(2)}`,
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
  console.log(
    PIN
      ? `\nPinned: receivers on CPU ${RECEIVER_CPUS}; workers, redis-server and the load generator on CPU ${OTHER_CPUS}.`
      : "\nUnpinned: every process shares all the machine's CPUs.",
  );
  console.log(`\n| receivers (2 processes, ${CONCURRENCY} connections) | req/s | p50 | p99 | max |`);
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
