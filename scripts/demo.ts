// `npm run demo`: the whole story, on this machine. It starts the emulator of the feature-flag
// service and an Express app that receives its webhooks with flag-webhooks (a typed router,
// maxAge and dedupe); registers the app, creates a flag, turns it on, rolls it out, and shows each
// signed delivery arriving as a typed event; then a tampered copy refused, a duplicate absorbed,
// a stale replay refused (sent with the flag-webhooks command), a receiver restarted and a
// redelivery after it, a deleted webhook that gets nothing more. Exits 1 if anything is not as
// promised. Where the runtime has SQLite built in (node:sqlite, Node 22.5 and later) the handled
// ids are kept in a file (.demo/demo.db in the clone), so the restarted receiver still knows them;
// on Node 20 they are kept in memory, and the restart forgets them, as the demo then says. Last,
// keep then work: a second endpoint keeps each event in a SQLite file (node:sqlite or better-sqlite3) and answers
// 202, and a worker whose handler fails twice runs it; `flag-webhooks inbox list` shows it pending
// in between, and the worker's third attempt does it, once.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import express from "express";
import { createRouter, type DedupeStore, MemoryDedupeStore } from "flag-webhooks";
import { createEmulator, type Delivery } from "flag-webhooks/emulator";
import { webhookMiddleware } from "flag-webhooks/express";
import { SqliteInbox } from "flag-webhooks/sqlite";
import { describeEvent } from "../examples/handle-events.js";

let failures = 0;
function check(ok: boolean, what: string): void {
  if (!ok) failures++;
  console.log(`   ${ok ? "✓" : "✗"} ${what}`);
}

// The app: one typed router as its handler, a five-minute replay window, and dedupe by event id.
const handled: string[] = [];
const router = createRouter().onAny((event) => {
  handled.push(event.id);
  return { status: 200, body: { received: event.id, summary: describeEvent(event) } };
});
let secret = "";
const app = express();
app.post("/webhooks", (req, res, next) => receive(req, res, next));
let receive: express.RequestHandler = (_req, res) => void res.sendStatus(503);
const server = app.listen(0, "127.0.0.1");
await new Promise((done) => server.once("listening", done));
const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;

// Where the app keeps the ids it handled: a SQLite file when the runtime has one built in.
const sqlite = await import("node:sqlite").catch(() => undefined);
const idsFile = resolve(import.meta.dirname, "../.demo/demo.db");
let closeIds = () => {};
/** The app's dedupe store, as a freshly started app opens it. */
function openIds(): DedupeStore {
  if (!sqlite) return new MemoryDedupeStore();
  mkdirSync(resolve(idsFile, ".."), { recursive: true });
  const db = new sqlite.DatabaseSync(idsFile);
  db.exec("pragma journal_mode = wal");
  closeIds = () => db.close();
  const inbox = new SqliteInbox(db, { scope: "demo" });
  inbox.migrate();
  return inbox;
}
const where = sqlite
  ? `ids kept in ${idsFile} (node:sqlite)`
  : `ids kept in memory (Node ${process.versions.node} has no built-in SQLite: node:sqlite needs Node 22.5)`;

const emulator = await createEmulator({
  retry: { initialDelayMs: 50 },
  actor: { type: "user", email: "dana@example.com" },
});
console.log(`Emulator of the feature-flag service: API ${emulator.url}, page ${emulator.pageUrl}`);
console.log(`Express app listening on ${appUrl}, with maxAge "5m" and dedupe by event id; ${where}\n`);

async function api(method: string, path: string, body?: unknown): Promise<unknown> {
  const base = path.startsWith("/_emulator") ? new URL(emulator.url).origin : `${emulator.url}/projects/demo`;
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return text ? JSON.parse(text) : { status: response.status };
}

/** Runs a step, waits for its deliveries, and prints each one with the app's answer. */
async function step(title: string, action: () => Promise<unknown>): Promise<Delivery[]> {
  console.log(`→ ${title}`);
  const before = new Set(emulator.deliveries().map((d) => d.id));
  await action();
  await emulator.settled();
  const sent = emulator.deliveries().filter((d) => !before.has(d.id));
  for (const delivery of sent) {
    const attempt = delivery.attempts.at(-1);
    const kind = delivery.kind === "event" ? "" : ` (${delivery.kind})`;
    console.log(
      `   ${delivery.event.type} ${delivery.event.environment}${kind} ← ${attempt?.status ?? attempt?.error} ${attempt?.responseBody ?? ""}`,
    );
  }
  if (sent.length === 0) console.log("   (no delivery)");
  return sent;
}

const last = (delivery: Delivery | undefined) => delivery?.attempts.at(-1);
const answer = (delivery: Delivery | undefined) => JSON.parse(last(delivery)?.responseBody || "{}");

const webhook = (await api("POST", "/webhooks", {
  url: appUrl,
  events: ["flag.created", "flag.updated", "rollout.step"],
})) as { id: string; secret: string };
secret = webhook.secret;
/** The app's receiver, as it starts: its dedupe store opened afresh. */
const startReceiver = () =>
  webhookMiddleware({
    secret,
    maxAge: "5m",
    dedupe: { store: openIds(), ttl: "10m" },
    onEvent: router,
  }) as express.RequestHandler;
receive = startReceiver();
console.log(`→ registered the app as webhook ${webhook.id}; its secret went to the app (never printed)\n`);

const created = await step("create the flag new-checkout (switched off in every environment)", () =>
  api("POST", "/flags", { key: "new-checkout", type: "boolean" }),
);
check(
  created.length === 3 && created.every((d) => d.state === "succeeded"),
  "one signed flag.created per environment, each accepted",
);

const [on] = await step("turn it on in production", () =>
  api("PATCH", "/flags/new-checkout", { environment: "production", on: true }),
);
check(
  answer(on).summary === "dana@example.com changed new-checkout in production (on: false → true)",
  "the app's router received a typed flag.updated with its changes and actor",
);

const [rollout] = await step("roll it out to 25% in production", () =>
  api("PATCH", "/flags/new-checkout", { environment: "production", rollout: { percent: 25 } }),
);
check(
  answer(rollout).summary?.includes("rollout.percent: null → 25") === true,
  "the change is rollout.percent null → 25",
);

const [advanced] = await step("the scheduled rollout advances to 50%", () =>
  api("POST", "/_emulator/projects/demo/flags/new-checkout/rollout-step", { environment: "production", percent: 50 }),
);
check(advanced?.state === "succeeded", "rollout.step delivered");

const [tampered] = await step("send a tampered copy of the flag.updated (body changed, signature kept)", () =>
  api("POST", `/_emulator/deliveries/${on?.id}/tampered-copy`),
);
check(answer(tampered).error?.code === "invalid_signature", "the app refused it with 401 invalid_signature");

const runs = handled.length;
const [duplicate] = await step("redeliver the flag.updated (the same event again, as after a lost answer)", () =>
  api("POST", `/_emulator/deliveries/${on?.id}/redeliver`),
);
check(
  last(duplicate)?.status === 204 && handled.length === runs,
  `the duplicate of ${answer(on).received} was absorbed: 204, Webhook-Duplicate, the handler not run again`,
);

// A delivery captured an hour ago and replayed, correctly signed: the flag-webhooks command sends it.
console.log("→ replay a correctly signed delivery from an hour ago, with `flag-webhooks send --file`");
const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-demo-"));
const stale = join(dir, "stale-event.json");
writeFileSync(
  stale,
  JSON.stringify({
    id: "evt_captured_an_hour_ago",
    type: "flag.updated",
    createdAt: new Date(Date.now() - 3_600_000).toISOString(),
    environment: "production",
    data: {
      flag: "new-checkout",
      changes: [{ path: "on", from: true, to: false }],
      actor: { type: "user", email: "mallory@example.com" },
    },
  }),
);
let sent = "";
try {
  // Asynchronously: the app answering it runs in this process.
  const cli = resolve(import.meta.dirname, "../dist/cli.js");
  const env = { ...process.env, FLAG_WEBHOOKS_SECRET: secret };
  sent = (await promisify(execFile)(process.execPath, [cli, "send", appUrl, "--file", stale], { env })).stdout;
} catch (error) {
  sent = String((error as { stdout?: string }).stdout ?? error); // exit 1: the receiver did not answer 2xx
}
rmSync(dir, { recursive: true, force: true });
console.log(sent.replace(/^/gm, "   ").trimEnd());
check(/401/.test(sent) && sent.includes("event_expired"), "the app refused the stale replay with 401 event_expired");

const before = handled.length;
const [afterRestart] = await step("restart the app's receiver, then redeliver the flag.updated", () => {
  closeIds();
  receive = startReceiver();
  return api("POST", `/_emulator/deliveries/${on?.id}/redeliver`);
});
if (sqlite) {
  check(
    last(afterRestart)?.status === 204 && handled.length === before,
    "the restarted receiver read its ids from the SQLite file: a duplicate, the handler not run again",
  );
} else {
  check(
    handled.length === before + 1,
    "no built-in SQLite on this Node: the ids were in memory, so the restarted receiver ran the event again",
  );
}

await api("DELETE", `/webhooks/${webhook.id}`);
const after = await step(`delete webhook ${webhook.id}, then turn the flag off`, () =>
  api("PATCH", "/flags/new-checkout", { environment: "production", on: false }),
);
check(after.length === 0, "a deleted webhook gets nothing more");

// Keep then work: a second endpoint keeps each event before its 202, and a worker runs it.
/** What the demo uses of a SQLite connection, the same on node:sqlite and better-sqlite3. */
interface KeepDb {
  exec(sql: string): unknown;
  prepare(sql: string): {
    run(...values: string[]): unknown;
    get(...values: string[]): unknown;
    all(...values: string[]): unknown;
  };
  close(): unknown;
}
const keepFile = resolve(import.meta.dirname, "../.demo/keep.db");
mkdirSync(resolve(keepFile, ".."), { recursive: true });
for (const suffix of ["", "-wal", "-shm"]) rmSync(`${keepFile}${suffix}`, { force: true });
// node:sqlite where the runtime has it (as for the ids above), better-sqlite3 elsewhere.
const keepDb: KeepDb = sqlite ? new sqlite.DatabaseSync(keepFile) : new Database(keepFile);
keepDb.exec("pragma journal_mode = wal");
keepDb.exec("create table billing_sync (event_id text not null, flag text not null)");
const inbox = new SqliteInbox(keepDb, { scope: "billing" });
await inbox.migrate();
const keepWebhook = (await api("POST", "/webhooks", { url: `${appUrl}/keep`, events: ["flag.updated"] })) as {
  id: string;
  secret: string;
};
app.post("/webhooks/keep", webhookMiddleware({ secret: keepWebhook.secret, maxAge: "5m", onEvent: inbox.enqueue() }));
let attempts = 0;
const worker = inbox.work(
  (event, tx, { attempt }) => {
    attempts++;
    if (attempt < 3) throw new Error(`the billing API is down (attempt ${attempt})`);
    if (event.type === "flag.updated") {
      (tx as KeepDb).prepare("insert into billing_sync (event_id, flag) values (?, ?)").run(event.id, event.data.flag);
    }
  },
  // The first retry waits long enough for the command below to list the event between attempts,
  // even on a loaded machine, where starting a Node process can take seconds.
  { retries: ["6s", "1s"], jitter: 0, interval: "100ms" },
);
console.log(`\nKeep then work: ${appUrl}/keep keeps each event in ${keepFile} before its 202; a worker runs it`);
console.log("   (its handler fails twice: the billing API it calls is down)");
const [kept] = await step("turn new-checkout on in staging", () =>
  api("PATCH", "/flags/new-checkout", { environment: "staging", on: true }),
);
check(last(kept)?.status === 202, "the app answered 202 once the event was kept in the file; the worker runs it");
const keptId = kept?.event.id as string;
/** Waits until the kept event is as `ready` says, for at most 20 s. */
async function until(ready: (event: Awaited<ReturnType<typeof inbox.kept>>) => boolean) {
  for (let waited = 0; waited < 20_000 && !ready(await inbox.kept(keptId)); waited += 50) {
    await new Promise((done) => setTimeout(done, 50));
  }
  return inbox.kept(keptId);
}
await until((event) => event?.state === "pending" && event.attempts === 1);
console.log("→ the first attempt failed; `flag-webhooks inbox list` shows the event waiting:");
let listed = "";
try {
  const cli = resolve(import.meta.dirname, "../dist/cli.js");
  const args = [cli, "inbox", "list", "--db", keepFile, "--scope", "billing"];
  listed = (await promisify(execFile)(process.execPath, args)).stdout;
} catch (error) {
  listed = String((error as { stderr?: string }).stderr ?? error);
}
console.log(listed.replace(/^/gm, "   ").trimEnd());
check(
  new RegExp(`^${keptId} +pending +flag\\.updated +new-checkout +1 +the billing API is down \\(attempt 1\\)`, "m").test(
    listed,
  ),
  "listed pending after 1 attempt, with its error and when the next one is due",
);
const done = await until((event) => event?.state === "done");
await worker.close();
const effects = keepDb.prepare("select count(*) as n from billing_sync where event_id = ?").get(keptId) as {
  n: number;
};
console.log(`→ the worker's third attempt: ${done?.state} after ${done?.attempts} attempts`);
check(
  done?.state === "done" && done.attempts === 3 && attempts === 3 && effects.n === 1,
  "done once by the worker on its third attempt: 3 runs, its billing_sync row written once",
);
keepDb.close();

await emulator.close();
server.close();
closeIds();
console.log(failures === 0 ? "\nEverything happened as promised." : `\n${failures} step(s) were not as promised.`);
process.exit(failures === 0 ? 0 : 1);
