// The cost of `order` in keep-then-work (docs/order.md), side by side in one run: the same SQLite
// inbox (better-sqlite3, WAL) with and without it, its worker draining the same kept events, in
// µs of CPU per attempt (process.cpuUsage over the whole drain, after a warm-up), as a ratio to
// the inbox without `order`. What `order` adds in statements is fixed by the code: two (the
// flag's positions read, then written) inside each attempt's transaction, no transaction of
// their own.
//
//   nice -n 10 npx tsx bench/order-worker.ts        # ~20 s
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { WebhookEvent } from "../src/index.js";
import { SqliteInbox } from "../src/stores/sqlite/index.js";
import { createEvent } from "../src/testing/index.js";

const N = Number(process.env.BENCH_ORDER_N ?? 3000);
const flags = Array.from({ length: 50 }, (_, i) => `flag-${i}`);
const start = Date.parse("2026-11-21T09:00:00Z");
let made = 0;

function events(count: number): WebhookEvent[] {
  return Array.from({ length: count }, () => {
    const i = made++;
    return createEvent("flag.updated", {
      id: `evt_${i}`,
      createdAt: new Date(start + i * 1000).toISOString(),
      data: { flag: flags[i % flags.length] as string, changes: [{ path: "rollout.percent", from: 0, to: i % 100 }] },
    });
  });
}

/** µs of CPU per attempt: `count` events kept, then drained by one worker. */
async function drain(inbox: SqliteInbox, count: number): Promise<number> {
  const keep = inbox.enqueue();
  for (const event of events(count)) await keep(event);
  const worker = inbox.work(() => {}, { interval: false });
  const before = process.cpuUsage();
  const ran = await worker.drain();
  const used = process.cpuUsage(before);
  await worker.close();
  if (ran !== count) throw new Error(`ran ${ran} of ${count}`);
  return (used.user + used.system) / count;
}

const rows: string[] = [];
let plain = 0;
for (const order of [false, true]) {
  const db = new Database(join(mkdtempSync(join(tmpdir(), "order-worker-bench-")), "inbox.db"));
  db.pragma("journal_mode = wal");
  db.pragma("synchronous = normal");
  const inbox = new SqliteInbox(db, { scope: "bench", order });
  await inbox.migrate();
  await drain(inbox, 300);
  const us = await drain(inbox, N);
  if (!order) plain = us;
  rows.push(`| SQLite worker${order ? ", order: true" : ""} | ${us.toFixed(1)} | ${(us / plain).toFixed(2)} |`);
  db.close();
}
console.log(`node ${process.version}, ${N} kept events each, one worker\n`);
console.log("| worker | µs CPU / attempt | ratio |\n| --- | --- | --- |");
for (const row of rows) console.log(row);
