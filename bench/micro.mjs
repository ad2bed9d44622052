// Micro benchmark: verifying one signature, flag-webhooks against a hand-written node:crypto check on Node and
// against other webhook libraries, for bodies of 256 B, 4 KiB, 64 KiB and 1 MiB.
//
//   node bench/micro.mjs                 # ~2.5 min
//   BENCH_QUICK=1 node bench/micro.mjs   # ~20 s smoke run
//
// Env: FLAG_WEBHOOKS_DIST (built library, default ../dist), BENCH_ROUNDS, BENCH_BATCH_MS,
// BENCH_SIZES (comma-separated byte counts), BENCH_RESULTS_FILE (append the markdown there),
// BENCH_JSON_FILE (write the raw figures there as JSON, for bench/charts.mjs).
import { createHmac, createSecretKey, timingSafeEqual } from "node:crypto";
import { appendFileSync, cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  distDir,
  distUrl,
  fmt,
  fmtBytes,
  fmtRatio,
  hexSignature,
  limitVerify,
  machine,
  median,
  paddedEvent,
  QUICK,
  SECRET,
  spread,
  table,
} from "./lib.mjs";

const require = createRequire(import.meta.url);
const { verify: octokitVerify } = await import("@octokit/webhooks-methods");
const Stripe = (await import("stripe")).default;
const { Webhook: StandardWebhook } = require("standardwebhooks");
const { Webhook: SvixWebhook } = require("svix");

const ROUNDS = Number(process.env.BENCH_ROUNDS) || (QUICK ? 4 : 12);
const BATCH_MS = Number(process.env.BENCH_BATCH_MS) || (QUICK ? 120 : 220);
const WARMUP_MS = QUICK ? 40 : 200;
const SIZES = process.env.BENCH_SIZES
  ? process.env.BENCH_SIZES.split(",").map(Number)
  : [256, 4 * 1024, 64 * 1024, 1024 * 1024];

const log = (message) => process.stderr.write(`${message}\n`);

// ------------------------------------------------------------------------- the library, twice

const dist = distDir();
const nodeLib = await import(distUrl("index.js", dist));

// The Web Crypto build of the same library, as it runs on Workers: no process.getBuiltinModule
// at load. A query string (index.js?web) is not enough: the entry re-exports a shared chunk
// (tsup splitting), which is imported without the query and so would come from the module cache
// with the node:crypto backend already selected. A copy of dist/ in a temporary directory is a
// genuinely fresh module graph.
const webCopy = mkdtempSync(join(tmpdir(), "flag-webhooks-web-"));
process.on("exit", () => rmSync(webCopy, { recursive: true, force: true }));
cpSync(dist, webCopy, { recursive: true });
const savedGetBuiltinModule = process.getBuiltinModule;
let webLib;
try {
  process.getBuiltinModule = undefined;
  webLib = await import(distUrl("index.js", webCopy));
} finally {
  process.getBuiltinModule = savedGetBuiltinModule;
}

/** How many times crypto.subtle.verify runs during `fn`: tells which backend a copy selected. */
async function subtleVerifyCalls(fn) {
  const subtle = globalThis.crypto.subtle;
  const original = subtle.verify;
  let calls = 0;
  subtle.verify = function (...args) {
    calls++;
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    subtle.verify = original;
  }
  return calls;
}

// --------------------------------------------------------------------------------- the cases

const subtle = globalThis.crypto.subtle;
const cachedKey = await subtle.importKey(
  "raw",
  new TextEncoder().encode(SECRET),
  { name: "HMAC", hash: "SHA-256" },
  false,
  ["verify"],
);
const stripeWebhooks = Stripe.webhooks?.signature ? Stripe.webhooks : new Stripe("sk_test_bench").webhooks;
const STRIPE_TOLERANCE = 10 * 365 * 24 * 3600; // seconds: the fixed timestamp never expires mid-run
const base64Secret = Buffer.from(SECRET, "utf8").toString("base64"); // same key bytes for everyone
const standard = new StandardWebhook(base64Secret);
const svix = new SvixWebhook(base64Secret);

/**
 * Each case: `make(body)` returns the function timed (all inputs prepared outside it; it starts
 * from the raw body as a Buffer, as a Node receiver has it) and `ok(result)` says whether a call
 * verified. `prepare` refreshes inputs that expire (signed timestamps) before each round.
 */
const CASES = [
  {
    id: "limit",
    label: "hand-written node:crypto check",
    name: "hand-written check (node:crypto, sync)",
    kind: "sync",
    notes: "createHmac + /^[0-9a-f]{64}$/ + Buffer.from(hex) + timingSafeEqual",
    make(body) {
      const sig = hexSignature(body);
      return { run: () => limitVerify(SECRET, body, sig), ok: (r) => r === true };
    },
  },
  {
    id: "limit-async",
    label: "hand-written check, async",
    name: "hand-written check inside an async fn (diagnostic)",
    kind: "async",
    notes: "the same work wrapped in `async`, awaited: the price of an async API alone",
    make(body) {
      const sig = hexSignature(body);
      const asyncLimit = async (secret, payload, signature) => limitVerify(secret, payload, signature);
      return { run: () => asyncLimit(SECRET, body, sig), ok: (r) => r === true };
    },
  },
  {
    id: "limit-key",
    name: "hand-written check with a cached KeyObject (diagnostic)",
    kind: "sync",
    notes:
      "the hand-written check with the key prepared once, as a library can: createHmac(KeyObject) + the same checks",
    make(body) {
      const sig = hexSignature(body);
      const key = createSecretKey(SECRET, "utf8");
      const HEX = /^[0-9a-f]{64}$/;
      const run = () =>
        HEX.test(sig) && timingSafeEqual(createHmac("sha256", key).update(body).digest(), Buffer.from(sig, "hex"));
      return { run, ok: (r) => r === true };
    },
  },
  {
    id: "ours-node",
    label: "flag-webhooks",
    name: "**flag-webhooks verifySignature (Node path)**",
    kind: "async",
    notes: "default import on Node (node:crypto backend)",
    make(body) {
      const signature = hexSignature(body);
      const { verifySignature } = nodeLib;
      return { run: () => verifySignature({ secret: SECRET, payload: body, signature }), ok: (r) => r === true };
    },
  },
  {
    id: "webcrypto",
    label: "cached-key Web Crypto",
    name: "cached-key Web Crypto subtle.verify",
    kind: "async",
    notes: "key imported once, signature bytes decoded once outside the loop",
    make(body) {
      const sigBytes = Buffer.from(hexSignature(body), "hex");
      return { run: () => subtle.verify("HMAC", cachedKey, sigBytes, body), ok: (r) => r === true };
    },
  },
  {
    id: "ours-web",
    label: "flag-webhooks (Web Crypto)",
    name: "**flag-webhooks verifySignature (Web Crypto path)**",
    kind: "async",
    notes: "loaded without process.getBuiltinModule, as on Workers; compare with the row above",
    make(body) {
      const signature = hexSignature(body);
      const { verifySignature } = webLib;
      return { run: () => verifySignature({ secret: SECRET, payload: body, signature }), ok: (r) => r === true };
    },
  },
  {
    id: "octokit",
    label: "@octokit/webhooks-methods",
    name: "@octokit/webhooks-methods verify",
    kind: "async",
    notes: "string payload only: Buffer→string decode timed; `sha256=` header; hex-string compare",
    make(body) {
      const header = `sha256=${hexSignature(body)}`;
      return { run: () => octokitVerify(SECRET, body.toString("utf8"), header), ok: (r) => r === true };
    },
  },
  {
    id: "stripe",
    label: "stripe",
    name: "stripe webhooks.signature.verifyHeader",
    kind: "sync",
    notes: "signs `<t>.<payload>`: Buffer→string decode, concat, re-encode; hex digest + TextEncoder compare",
    make(body) {
      const t = Math.floor(Date.now() / 1000);
      const v1 = createHmac("sha256", SECRET).update(`${t}.`).update(body).digest("hex");
      const header = `t=${t},v1=${v1}`;
      return {
        run: () => stripeWebhooks.signature.verifyHeader(body, header, SECRET, STRIPE_TOLERANCE),
        ok: (r) => r === true,
      };
    },
  },
  {
    id: "standardwebhooks",
    label: "standardwebhooks",
    name: "standardwebhooks Webhook.verify",
    kind: "sync",
    notes: "signs `<id>.<t>.<payload>`: Buffer→string, concat, TextEncoder; pure-JS SHA-256; jsonParse:false",
    prepare(state, body) {
      const id = "msg_bench";
      state.headers = {
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
        "webhook-signature": "",
      };
      state.headers["webhook-signature"] = standard.sign(
        id,
        new Date(Number(state.headers["webhook-timestamp"]) * 1000),
        body,
      );
    },
    make(body, state) {
      // Without jsonParse:false it would also JSON.parse the body on success.
      return { run: () => standard.verify(body, state.headers, { jsonParse: false }), ok: () => true };
    },
  },
  {
    id: "svix",
    label: "svix",
    name: "svix Webhook.verify",
    kind: "sync",
    notes: "as standardwebhooks (bundles 1.0.0), and always JSON.parses the body (no option)",
    prepare(state, body) {
      const id = "msg_bench";
      const timestamp = Math.floor(Date.now() / 1000);
      state.headers = {
        "svix-id": id,
        "svix-timestamp": String(timestamp),
        "svix-signature": svix.sign(id, new Date(timestamp * 1000), body),
      };
    },
    make(body, state) {
      return { run: () => svix.verify(body, state.headers), ok: (r) => typeof r === "object" && r !== null };
    },
  },
];

// ----------------------------------------------------------------------------------- harness

const AsyncFunction = (async () => {}).constructor;

/**
 * A timing loop compiled separately for every case, so no case's call site is made
 * megamorphic by the others. Sync functions are called directly; async ones are awaited one
 * after the other. Returns the last result, which is checked after every batch.
 */
function compileLoop(kind) {
  return kind === "async"
    ? new AsyncFunction("fn", "n", "let r; for (let i = 0; i < n; i++) r = await fn(); return r;")
    : new Function("fn", "n", "let r; for (let i = 0; i < n; i++) r = fn(); return r;");
}

async function timeBatch(slot, n) {
  const start = performance.now();
  const result = await slot.loop(slot.run, n);
  const elapsed = performance.now() - start;
  if (!slot.ok(result)) throw new Error(`${slot.id} @ ${slot.size} B: a timed call did not verify (${result})`);
  return (elapsed * 1e6) / n; // ns per operation
}

/** Iterations that fill about `ms` milliseconds, from a doubling probe. */
async function calibrate(slot, ms) {
  let n = 1;
  for (;;) {
    const start = performance.now();
    await slot.loop(slot.run, n);
    const elapsed = performance.now() - start;
    if (elapsed >= 15 || n >= 1 << 24) return Math.max(1, Math.round((n * ms) / Math.max(elapsed, 1e-3)));
    n *= 2;
  }
}

// ----------------------------------------------------------------------------------------- run

log(`micro: ${machine()}`);
log(`micro: library ${dist}; ${ROUNDS} rounds × ${BATCH_MS} ms per case${QUICK ? " (BENCH_QUICK)" : ""}`);

// The two loads must really differ: the Node copy never touches Web Crypto, the web copy does.
{
  const body = paddedEvent(256);
  const signature = hexSignature(body);
  if ((await nodeLib.sign({ secret: SECRET, payload: body })) !== signature)
    throw new Error("sign() disagrees with createHmac");
  const nodeCalls = await subtleVerifyCalls(() =>
    nodeLib.verifySignature({ secret: SECRET, payload: body, signature }),
  );
  const webCalls = await subtleVerifyCalls(() => webLib.verifySignature({ secret: SECRET, payload: body, signature }));
  if (nodeCalls !== 0 || webCalls !== 1) {
    throw new Error(
      `backend selection not as expected: Node import used subtle.verify ${nodeCalls}×, web copy ${webCalls}×`,
    );
  }
}

const slots = [];
for (const size of SIZES) {
  const body = paddedEvent(size);
  for (const c of CASES) {
    const state = {};
    c.prepare?.(state, body);
    const { run, ok } = c.make(body, state);
    const slot = { id: c.id, case: c, size, body, state, run, ok, loop: compileLoop(c.kind), samples: [] };
    // Must verify before anything is timed: a benchmark of a failing path is worthless.
    let first;
    try {
      first = await run();
    } catch (error) {
      throw new Error(`${c.id} @ ${size} B: does not verify: ${error.message}`);
    }
    if (!ok(first)) throw new Error(`${c.id} @ ${size} B: does not verify (returned ${first})`);
    slots.push(slot);
  }
}

log("micro: warming up and calibrating");
for (const slot of slots) {
  await slot.loop(slot.run, await calibrate(slot, WARMUP_MS));
  slot.n = await calibrate(slot, BATCH_MS);
}

const started = performance.now();
for (let round = 0; round < ROUNDS; round++) {
  for (const size of SIZES) {
    const group = slots.filter((s) => s.size === size);
    for (const slot of group) slot.case.prepare?.(slot.state, slot.body); // fresh timestamps
    // Interleaved, and the order rotates every round so no case always runs first or last.
    for (let k = 0; k < group.length; k++) {
      const slot = group[(k + round) % group.length];
      slot.samples.push(await timeBatch(slot, slot.n));
    }
  }
  log(`micro: round ${round + 1}/${ROUNDS} done (${((performance.now() - started) / 1000).toFixed(1)} s)`);
}

// ------------------------------------------------------------------------------------- report

const result = (id, size) => slots.find((s) => s.id === id && s.size === size);
const sections = [];
sections.push("## Micro benchmark: one signature verification");
sections.push("");
sections.push(
  `${machine()}. Median ns/op of ${ROUNDS} interleaved rounds (each round one batch of about ${BATCH_MS} ms per case, ` +
    "case order rotated per round); min–max is the spread across rounds. Ratio is median ÷ median of the hand-written node:crypto check " +
    "(lower is better, 1.00× = that check). Every case verified successfully before and after every timed batch. " +
    "**sync** cases are called directly in a loop; **async** cases are awaited one call at a time (sequentially), " +
    "so their figure includes a promise and a microtask turn, and for Web Crypto a thread-pool round trip.",
);
for (const size of SIZES) {
  const limit = median(result("limit", size).samples);
  const web = median(result("webcrypto", size).samples);
  const rows = CASES.map((c) => {
    const s = result(c.id, size).samples;
    const { min, max } = spread(s);
    const m = median(s);
    const mbps = (size / m) * 1e3; // bytes per ns × 1e3 = MB/s
    const extra = c.id === "ours-web" ? ` (${fmtRatio(m / web)} of cached-key Web Crypto)` : "";
    return [c.name, c.kind, fmt(m), `${fmt(min)}–${fmt(max)}`, fmtRatio(m / limit) + extra, fmt(mbps, 0)];
  });
  sections.push("");
  sections.push(`### ${fmtBytes(size)} body`);
  sections.push("");
  sections.push(
    table(["implementation", "call", "ns/op (median)", "min–max", "÷ hand-written", "MB/s"], rows, [
      "l",
      "l",
      "r",
      "r",
      "r",
      "r",
    ]),
  );
}

sections.push("");
sections.push("### Summary: median ÷ hand-written node:crypto check");
sections.push("");
sections.push(
  table(
    ["implementation", ...SIZES.map(fmtBytes)],
    CASES.map((c) => [
      c.name,
      ...SIZES.map((size) => fmtRatio(median(result(c.id, size).samples) / median(result("limit", size).samples))),
    ]),
  ),
);

sections.push("");
sections.push("### What each case does (and the conversions each library forces)");
sections.push("");
for (const c of CASES) sections.push(`- ${c.name.replaceAll("**", "")} (${c.kind}): ${c.notes}.`);
sections.push(
  "- All cases start from the same raw body as a Node `Buffer` (what a receiver reads off the socket) and the same " +
    "key bytes; headers in each library's own format are built before timing. Conversions a library forces are inside " +
    "the timed call (octokit's string payload is decoded from the Buffer in the timed call; stripe, standardwebhooks " +
    "and svix take the Buffer and decode it themselves).",
);

const markdown = `${sections.join("\n")}\n`;
process.stdout.write(`\n${markdown}`);
if (process.env.BENCH_RESULTS_FILE) appendFileSync(process.env.BENCH_RESULTS_FILE, `${markdown}\n`);

// The raw figures, for the charts (bench/charts.mjs) and anyone who wants to redo the statistics.
if (process.env.BENCH_JSON_FILE) {
  const json = {
    part: "micro",
    date: new Date().toISOString(),
    machine: machine(),
    quick: QUICK,
    rounds: ROUNDS,
    batchMs: BATCH_MS,
    sizes: SIZES,
    unit: "ns per call",
    cases: CASES.map((c) => ({
      id: c.id,
      label: c.label,
      name: c.name.replaceAll("**", ""),
      kind: c.kind,
      results: SIZES.map((size) => {
        const samples = result(c.id, size).samples;
        const { min, max } = spread(samples);
        return { size, medianNs: median(samples), minNs: min, maxNs: max, samplesNs: samples };
      }),
    })),
  };
  writeFileSync(process.env.BENCH_JSON_FILE, `${JSON.stringify(json, null, 2)}\n`);
}
