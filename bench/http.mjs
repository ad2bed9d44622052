// End-to-end loopback load: one 2 KiB signed delivery POSTed with autocannon to each receiver in
// turn, every receiver in its own child process (bench/http-servers.mjs), 127.0.0.1 only.
//
//   node bench/http.mjs                  # ~5 min: 7 receivers × 5 rounds × (2 s warm-up + 5 s)
//   BENCH_QUICK=1 node bench/http.mjs    # ~30 s smoke run
//
// Env: FLAG_WEBHOOKS_DIST (built library, default ../dist), BENCH_HTTP_DURATION (seconds per
// measured run), BENCH_HTTP_WARMUP (seconds of discarded load before it), BENCH_HTTP_CONNECTIONS
// (default 50), BENCH_HTTP_ROUNDS (default 5; quick 2), BENCH_RESULTS_FILE (append the markdown
// there), BENCH_JSON_FILE (write the raw figures there as JSON, for bench/charts.mjs).
import { randomUUID } from "node:crypto";
import { appendFileSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import autocannon from "autocannon";
import {
  distDir,
  fmt,
  fmtRatio,
  hexSignature,
  killServers,
  machine,
  median,
  paddedEvent,
  QUICK,
  spread,
  startServer,
  stopServer,
  table,
} from "./lib.mjs";

const DURATION = Number(process.env.BENCH_HTTP_DURATION) || (QUICK ? 1 : 5);
const WARMUP = Number(process.env.BENCH_HTTP_WARMUP ?? (QUICK ? 0.5 : 2));
// The default conditions: 50 connections, 5 rounds interleaved in one run.
const CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS) || 50;
const ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS) || (QUICK ? 2 : 5);
const BODY_SIZE = 2048;
const PATH = "/api/github/webhooks";

// `label`: the short name in the chart (bench/charts.mjs); `ours`: drawn in the accent colour.
const ALL_CASES = [
  { id: "bare-node", name: "bare node:http (hand-written verify + JSON.parse)", label: "bare node:http", status: 204 },
  {
    id: "ours-node",
    name: "**flag-webhooks/express on plain node:http**",
    label: "ours on node:http",
    ours: true,
    status: 204,
  },
  {
    id: "bare-express",
    name: "hand-written Express (express.raw + hand-written verify + JSON.parse)",
    label: "Express, hand-written",
    status: 204,
  },
  {
    id: "ours-express",
    name: "**flag-webhooks/express in Express**",
    label: "ours in Express",
    ours: true,
    status: 204,
  },
  { id: "ours-koa", name: "**flag-webhooks/koa in Koa**", label: "ours in Koa", ours: true, status: 204 },
  {
    id: "ours-fetch",
    name: "**flag-webhooks/fetch behind a Node→fetch bridge**",
    label: "ours, fetch bridge",
    ours: true,
    status: 204,
  },
  { id: "octokit", name: "@octokit/webhooks createNodeMiddleware", label: "@octokit/webhooks", status: 200 },
];

// BENCH_HTTP_CASES=ours-node,octokit: run only these (bare-node, the baseline, always runs).
const only = process.env.BENCH_HTTP_CASES?.split(",").map((id) => id.trim());
const CASES = only ? ALL_CASES.filter((c) => only.includes(c.id) || c.id === "bare-node") : ALL_CASES;
if (only?.some((id) => !ALL_CASES.some((c) => c.id === id))) {
  throw new Error(`BENCH_HTTP_CASES: unknown case; known: ${ALL_CASES.map((c) => c.id).join(", ")}`);
}

const log = (message) => process.stderr.write(`${message}\n`);

// ------------------------------------------------------------------------------ the delivery

const body = paddedEvent(BODY_SIZE);
const signature = hexSignature(body);
// One request, byte for byte the same for every receiver: our header and octokit's.
const headers = {
  "content-type": "application/json",
  "service-signature": signature,
  "x-github-event": "ping",
  "x-github-delivery": randomUUID(),
  "x-hub-signature-256": `sha256=${signature}`,
};

// ------------------------------------------------------------------------- child processes

const killAll = killServers;
process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

/** The child's CPU time so far (user + system), in microseconds. */
function serverCpu(child) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not report its CPU time")), 5000);
    const onMessage = (message) => {
      if (message?.cpu) {
        clearTimeout(timer);
        child.off("message", onMessage);
        resolve(message.cpu.user + message.cpu.system);
      }
    };
    child.on("message", onMessage);
    child.send("cpu");
  });
}

/** One request outside autocannon: the receiver must answer the expected 2xx before timing. */
function probe(port) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, method: "POST", path: PATH, headers: { ...headers, "content-length": body.length } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode, text }));
      },
    );
    req.setTimeout(5000, () => req.destroy(new Error("probe timed out")));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * One autocannon run. Latency percentiles are computed here from every response's own timing
 * (autocannon measures it with hrtime, in fractional ms, but its histogram keeps whole ms only,
 * too coarse for sub-millisecond loopback latencies).
 */
function load(port, duration) {
  return new Promise((resolve, reject) => {
    const latencies = [];
    const instance = autocannon(
      {
        url: `http://127.0.0.1:${port}${PATH}`,
        method: "POST",
        headers,
        body,
        connections: CONNECTIONS,
        duration,
        timeout: 10,
      },
      (error, result) => (error ? reject(error) : resolve({ result, latencies: Float64Array.from(latencies).sort() })),
    );
    instance.on("response", (_client, _status, _bytes, ms) => latencies.push(ms));
  });
}

function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

// -------------------------------------------------------------------------------------- run

log(`http: ${machine()}`);
log(
  `http: library ${distDir()}; ${BODY_SIZE} B body, ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s ` +
    `per run, ${ROUNDS} rounds${QUICK ? " (BENCH_QUICK)" : ""}`,
);

const runs = Object.fromEntries(CASES.map((c) => [c.id, []]));
for (let round = 0; round < ROUNDS; round++) {
  // Interleaved; the second round goes in the opposite order so no case always follows the same one.
  const order = round % 2 === 0 ? CASES : [...CASES].reverse();
  for (const c of order) {
    const { child, port } = await startServer("http-servers.mjs", c.id);
    try {
      const first = await probe(port);
      if (first.status !== c.status) {
        throw new Error(`${c.id}: expected ${c.status} before timing, got ${first.status} ${first.text.slice(0, 200)}`);
      }
      if (WARMUP > 0) await load(port, WARMUP);
      const cpuBefore = await serverCpu(child);
      const { result: r, latencies } = await load(port, DURATION);
      const cpuAfter = await serverCpu(child);
      const codes = Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]));
      const unexpected = Object.entries(codes).filter(([code]) => Number(code) !== c.status);
      const run = {
        rps: r.requests.total / r.duration,
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        total: r.requests.total,
        cpuPerReq: (cpuAfter - cpuBefore) / latencies.length, // µs of server CPU per response
        non2xx: r.non2xx,
        errors: r.errors + r.timeouts,
        unexpected: unexpected.reduce((sum, [, n]) => sum + n, 0),
      };
      runs[c.id].push(run);
      log(
        `http: round ${round + 1} ${c.id.padEnd(13)} ${fmt(run.rps, 0).padStart(7)} req/s  p50 ${fmt(run.p50, 3)} ms  ` +
          `p99 ${fmt(run.p99, 3)} ms  server CPU ${fmt(run.cpuPerReq, 1)} µs/req  non-2xx ${run.non2xx}  errors ${run.errors}  codes ${JSON.stringify(codes)}`,
      );
    } finally {
      await stopServer(child);
    }
  }
}

// ------------------------------------------------------------------------------------ report

const stat = (id, key) => runs[id].map((r) => r[key]);
const med = (id, key) => median(stat(id, key));
const range = (id, key, digits) => {
  const { min, max } = spread(stat(id, key));
  return `${fmt(min, digits)}–${fmt(max, digits)}`;
};

const rows = CASES.map((c) => [
  c.name,
  String(c.status),
  fmt(med(c.id, "rps"), 0),
  range(c.id, "rps", 0),
  fmt(med(c.id, "p50"), 3),
  fmt(med(c.id, "p99"), 3),
  fmtRatio(med(c.id, "rps") / med("bare-node", "rps")),
  fmt(med(c.id, "cpuPerReq"), 1),
  fmtRatio(med(c.id, "cpuPerReq") / med("bare-node", "cpuPerReq")),
  String(stat(c.id, "non2xx").reduce((a, b) => a + b, 0) + stat(c.id, "errors").reduce((a, b) => a + b, 0)),
]);

const ratio = (a, b, key) => med(a, key) / med(b, key);
// Per-round ratios (the two receivers of one round ran minutes apart at most) show how much of a
// ratio is noise.
const roundRatios = (a, b, key) => runs[a].map((r, i) => fmtRatio(r[key] / runs[b][i][key])).join(", ");
// Each target is on one measure: the node:http one on CPU per request (the target: at most
// 1.05× the bare receiver's CPU per request; both servers run at 100% CPU, so CPU per request is what differs,
// and it is far less sensitive to other load than req/s), the Express one on req/s.
const TARGETS = [
  ["flag-webhooks/express on node:http ÷ bare node:http", "ours-node", "bare-node", { key: "cpuPerReq", max: 1.05 }],
  [
    "flag-webhooks/express in Express ÷ hand-written Express",
    "ours-express",
    "bare-express",
    { key: "rps", min: 0.95 },
  ],
  ["flag-webhooks/koa ÷ bare node:http", "ours-koa", "bare-node"],
  ["flag-webhooks/fetch (bridged) ÷ bare node:http", "ours-fetch", "bare-node"],
  ["@octokit/webhooks ÷ bare node:http", "octokit", "bare-node"],
].filter(([, a, b]) => runs[a] && runs[b]);
const targetText = (t) => (t ? `${t.key === "rps" ? "req/s" : "CPU/req"} ${t.max ? `≤ ${t.max}` : `≥ ${t.min}`}×` : "");
const targetMet = (a, b, t) => {
  if (!t) return "";
  const value = ratio(a, b, t.key);
  return (t.max ? value <= t.max : value >= t.min) ? "met" : "**not met**";
};
const targets = TARGETS.map(([label, a, b, target]) => [
  label,
  fmtRatio(ratio(a, b, "cpuPerReq")),
  roundRatios(a, b, "cpuPerReq"),
  fmtRatio(ratio(a, b, "rps")),
  roundRatios(a, b, "rps"),
  targetText(target),
  targetMet(a, b, target),
]);

const totalNon2xx = CASES.reduce((sum, c) => sum + stat(c.id, "non2xx").reduce((a, b) => a + b, 0), 0);
const sections = [
  "## HTTP benchmark: 2 KiB signed delivery over loopback",
  "",
  `${machine()}. autocannon in the parent process, each receiver in a fresh child process, 127.0.0.1 only; ` +
    `${CONNECTIONS} connections, keep-alive, ${WARMUP} s discarded warm-up then ${DURATION} s measured per run; ` +
    `${ROUNDS} rounds, cases interleaved (alternate rounds in reverse order). Body: a valid \`flag.updated\` event padded ` +
    `with JSON whitespace to ${BODY_SIZE} bytes; every receiver verifies it, parses it and checks its type (500 otherwise). ` +
    "req/s and latencies are medians over rounds; min–max is the spread across rounds. Server CPU µs/req is the " +
    "receiver process's user + system CPU time during the measured run divided by the responses: it is much less " +
    "sensitive to other load on the machine than req/s (on a busy machine, trust it over req/s).",
  "",
  table(
    [
      "receiver",
      "status",
      "req/s",
      "req/s min–max",
      "p50 ms",
      "p99 ms",
      "req/s ÷ bare node:http",
      "server CPU µs/req",
      "CPU/req ÷ bare (lower is better)",
      "non-2xx + errors",
    ],
    rows,
    ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
  ),
  "",
  table(
    [
      "ratio",
      "CPU/req (median; lower is better)",
      "CPU/req per round",
      "req/s (median; higher is better)",
      "req/s per round",
      "target",
      "",
    ],
    targets,
    ["l", "r", "r", "r", "r", "r", "l"],
  ),
  "",
  `Non-2xx answers during all measured runs: ${totalNon2xx} (each receiver answered its expected status to a probe ` +
    "request before timing). octokit answers 200 with a body `ok`; the others answer 204 without a body. octokit also " +
    "needs `content-type: application/json` and the x-github-event / x-github-delivery / x-hub-signature-256 headers; all " +
    "receivers get the identical request bytes, with those headers, at octokit's default path.",
];

const markdown = `${sections.join("\n")}\n`;
process.stdout.write(`\n${markdown}`);
if (process.env.BENCH_RESULTS_FILE) appendFileSync(process.env.BENCH_RESULTS_FILE, `${markdown}\n`);

// The raw figures, for the charts (bench/charts.mjs) and anyone who wants to redo the statistics.
if (process.env.BENCH_JSON_FILE) {
  const summary = (id, key) => ({ median: med(id, key), ...spread(stat(id, key)) });
  const json = {
    part: "http",
    date: new Date().toISOString(),
    machine: machine(),
    quick: QUICK,
    bodySize: BODY_SIZE,
    connections: CONNECTIONS,
    rounds: ROUNDS,
    durationS: DURATION,
    warmupS: WARMUP,
    cases: CASES.map((c) => ({
      id: c.id,
      label: c.label,
      name: c.name.replaceAll("**", ""),
      ours: Boolean(c.ours),
      status: c.status,
      rps: summary(c.id, "rps"),
      cpuUsPerReq: summary(c.id, "cpuPerReq"),
      p50Ms: summary(c.id, "p50"),
      p99Ms: summary(c.id, "p99"),
      runs: runs[c.id].map((r) => ({
        rps: r.rps,
        p50Ms: r.p50,
        p99Ms: r.p99,
        cpuUsPerReq: r.cpuPerReq,
        total: r.total,
        non2xx: r.non2xx,
        errors: r.errors,
      })),
    })),
    targets: TARGETS.map(([label, a, b, target]) => ({
      label,
      case: a,
      baseline: b,
      cpuRatio: ratio(a, b, "cpuPerReq"),
      rpsRatio: ratio(a, b, "rps"),
      target: target ?? null,
      met: target ? targetMet(a, b, target) === "met" : null,
    })),
  };
  writeFileSync(process.env.BENCH_JSON_FILE, `${JSON.stringify(json, null, 2)}\n`);
}
if (
  totalNon2xx > 0 ||
  CASES.some((c) => stat(c.id, "errors").some((e) => e > 0) || stat(c.id, "unexpected").some((e) => e > 0))
) {
  log("http: some requests failed (non-2xx, unexpected status, errors or timeouts): the figures above are not valid");
  process.exitCode = 1;
}
