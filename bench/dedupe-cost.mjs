// What `dedupe` on a full MemoryDedupeStore adds to one delivery through flag-webhooks/express,
// without the network: the middleware is called in this process on a real IncomingMessage (the
// signed body pushed into it) and a real ServerResponse (no socket), so what is timed is the
// library's own path, the answer's watch included, and none of the kernel's. Each build named in
// BENCH_DEDUPE_DISTS (name:dir,…; default this repository's dist) runs "no option" and "a full
// MemoryDedupeStore, new id each delivery" side by side, in interleaved batches (alternate rounds
// reversed), and reports per delivery: CPU µs (process.cpuUsage; the median of each round's
// difference to that build's baseline, with its interquartile range) and bytes allocated in V8's
// young generation (the median over batches in which no scavenge ran).
//
//   node bench/dedupe-cost.mjs
//   BENCH_DEDUPE_DISTS=main:/tmp/main-dist,branch:dist BENCH_DEDUPE_ROUNDS=300 node bench/dedupe-cost.mjs
import { createHmac } from "node:crypto";
import { IncomingMessage, ServerResponse } from "node:http";
import { Socket } from "node:net";
import { resolve } from "node:path";
import v8 from "node:v8";
import { distDir, distUrl, SECRET } from "./lib.mjs";

const DISTS = (process.env.BENCH_DEDUPE_DISTS ?? `this:${distDir()}`)
  .split(",")
  .map((entry) => entry.split(":"))
  .map(([name, dir]) => ({ name, dir: resolve(dir) }));
const ROUNDS = Number(process.env.BENCH_DEDUPE_ROUNDS) || 200;
const BATCH = 100;
const createdAt = new Date().toISOString();
let serial = 0;

/** A signed 2 KiB `flag.updated` delivery with a new id. */
function signed() {
  const id = `evt_${String(serial++).padStart(22, "0")}`;
  const json =
    `{"id":"${id}","type":"flag.updated","createdAt":"${createdAt}","environment":"production",` +
    '"data":{"flag":"new-checkout","changes":[{"path":"on","from":false,"to":true}],' +
    '"actor":{"type":"user","email":"dana@example.com"}}}';
  const body = Buffer.from(json.padEnd(2048, " "));
  return { body, signature: createHmac("sha256", SECRET).update(body).digest("hex") };
}

/** One delivery through the middleware: a request whose body is all there, a response with no socket. */
async function deliver(middleware, { body, signature }) {
  const req = new IncomingMessage(new Socket());
  req.method = "POST";
  req.headers = { "service-signature": signature, "content-type": "application/json", "content-length": "2048" };
  req.complete = true; // as Node's parser marks a request whose body it read whole
  req.push(body);
  req.push(null);
  const res = new ServerResponse(req);
  await middleware(req, res);
  if (res.statusCode !== 204) throw new Error(`answered ${res.statusCode}`);
}

const cases = [];
for (const { name, dir } of DISTS) {
  const { webhookMiddleware } = await import(distUrl("express.js", dir));
  const { MemoryDedupeStore } = await import(distUrl("index.js", dir));
  // Full (maxKeys ids), as after running a while: every new id evicts the oldest.
  const store = new MemoryDedupeStore({ maxKeys: 10_000 });
  for (let i = 0; i < 10_000; i++) store.complete(`prefill_${i}`, 3_600_000);
  for (const [option, extra] of [
    ["no option", {}],
    ["memory", { dedupe: { store, ttl: "1h" } }],
  ]) {
    const middleware = webhookMiddleware({ secret: SECRET, ...extra, onEvent() {} });
    cases.push({ build: name, option, middleware, us: [], bytes: [] });
  }
}

const young = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "new_space").space_used_size;

async function batch(c) {
  const deliveries = Array.from({ length: BATCH }, signed);
  const before = young();
  const started = process.cpuUsage();
  for (const d of deliveries) await deliver(c.middleware, d);
  const used = process.cpuUsage(started);
  const after = young();
  c.us.push((used.user + used.system) / BATCH);
  if (after > before) c.bytes.push((after - before) / BATCH);
}

for (const c of cases) for (let i = 0; i < 5; i++) await batch(c); // warm-up
for (const c of cases) c.us.length = c.bytes.length = 0;
for (let round = 0; round < ROUNDS; round++) {
  for (const c of round % 2 === 0 ? cases : [...cases].reverse()) await batch(c);
}

const sorted = (values) => [...values].sort((a, b) => a - b);
const at = (values, p) => sorted(values)[Math.floor(p * (values.length - 1))];
console.log(`dedupe-cost: ${ROUNDS} rounds of ${BATCH} deliveries per case, Node ${process.version}`);
console.log("| build | CPU µs / delivery, no option | memory: added CPU µs (IQR) | memory: added bytes |");
console.log("| :---- | ---------------------------: | :------------------------- | ------------------: |");
for (let i = 0; i < cases.length; i += 2) {
  const [base, memory] = [cases[i], cases[i + 1]];
  const added = memory.us.map((us, k) => us - base.us[k]);
  console.log(
    `| ${base.build} | ${at(base.us, 0.5).toFixed(2)} | +${at(added, 0.5).toFixed(2)} (${at(added, 0.25).toFixed(2)} to ${at(added, 0.75).toFixed(2)}) | +${(at(memory.bytes, 0.5) - at(base.bytes, 0.5)).toFixed(0)} |`,
  );
}
