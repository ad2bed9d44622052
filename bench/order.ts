// The cost of `order` (docs/order.md), side by side in one run: the same fetch receiver and the
// same store with and without it, in µs of CPU per delivery (process.cpuUsage over many
// deliveries, after a warm-up), as a ratio to the same store without `order`. In-process: the
// memory store, and the SQLite inbox on better-sqlite3 over a WAL file. What `order` adds in
// statements is fixed by the code: none on the memory store; on the inboxes two (the flag's
// positions read, then written), inside the handler's transaction.
//
//   nice -n 10 npx tsx bench/order.ts        # ~20 s
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { webhookHandler } from "../src/adapters/fetch.js";
import { MemoryOrderStore } from "../src/index.js";
import { SqliteInbox } from "../src/stores/sqlite/index.js";
import { createEvent, signedRequest } from "../src/testing/index.js";

const SECRET = "bench-order";
const N = Number(process.env.BENCH_ORDER_N ?? 4000);
const flags = Array.from({ length: 50 }, (_, i) => `flag-${i}`);

async function requests(count: number): Promise<Request[]> {
  const start = Date.parse("2026-11-21T09:00:00Z");
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      signedRequest({
        secret: SECRET,
        event: createEvent("flag.updated", {
          createdAt: new Date(start + i * 1000).toISOString(),
          data: { flag: flags[i % flags.length], changes: [{ path: "rollout.percent", from: 0, to: i % 100 }] },
        }),
      }),
    ),
  );
}

/** µs of CPU per delivery, deliveries sent one after another. */
async function measure(handle: (request: Request) => Promise<Response>): Promise<number> {
  for (const request of await requests(500)) await handle(request);
  const batch = await requests(N);
  const before = process.cpuUsage();
  for (const request of batch) {
    const response = await handle(request);
    if (response.status !== 204) throw new Error(`answered ${response.status}`);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / N;
}

function sqlite(order: boolean) {
  const db = new Database(join(mkdtempSync(join(tmpdir(), "order-bench-")), "inbox.db"));
  db.pragma("journal_mode = wal");
  db.pragma("synchronous = normal");
  return { db, inbox: new SqliteInbox(db, { scope: "bench", order }) };
}

const rows: string[] = [];
const memoryPlain = await measure(webhookHandler({ secret: SECRET, onEvent: () => {} }));
const memoryOrdered = await measure(
  webhookHandler({ secret: SECRET, order: { store: new MemoryOrderStore() }, onEvent: () => {} }),
);
rows.push(`| fetch receiver, no order | ${memoryPlain.toFixed(1)} | 1.00 |`);
rows.push(
  `| fetch receiver, order on MemoryOrderStore | ${memoryOrdered.toFixed(1)} | ${(memoryOrdered / memoryPlain).toFixed(2)} |`,
);
let plain = 0;
for (const order of [false, true]) {
  const { inbox, db } = sqlite(order);
  await inbox.migrate();
  const us = await measure(webhookHandler({ secret: SECRET, onEvent: inbox.handle(() => {}) }));
  if (!order) plain = us;
  rows.push(`| SQLite inbox${order ? ", order: true" : ""} | ${us.toFixed(1)} | ${(us / plain).toFixed(2)} |`);
  db.close();
}
console.log(`node ${process.version}, ${N} deliveries each, one at a time\n`);
console.log("| receiver | µs CPU / delivery | ratio |\n| --- | --- | --- |");
for (const row of rows) console.log(row);
