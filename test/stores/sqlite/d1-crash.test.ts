import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { expect, it } from "vitest";
import { bundleWorker } from "../../support/cloudflare-bundle.js";
import { signatureOf } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { databaseFile } from "../../support/sqlite.js";

// Exactly once through crashes on D1, as far as miniflare allows: one Worker process (miniflare
// and its workerd, test/fixtures/cloudflare/d1-runner.mjs) whose D1 database persists in a folder,
// every event sent twice at the same moment, the handler saying "start" then waiting 40 ms before
// it returns its statement; the Worker's whole process group SIGKILLed inside a handler again and
// again, and started again on the same folder and port. The sender retries every non-2xx and
// broken connection; at the end each event has exactly one effect row. Miniflare runs one workerd
// process over a D1 folder, so two Worker processes on one database (as two receivers on one
// SQLite file are tested) cannot be run here.

const root = resolve(import.meta.dirname, "../../..");
const SECRET = "whsec-sqlite-d1-crash";

function body(id: string): string {
  return JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "prod",
    data: { flag: "new-checkout", changes: [], actor: { type: "user", email: "dana@example.com" } },
  });
}

interface Worker {
  child: ChildProcess;
  output: string;
}

it("a Worker on D1 SIGKILLed mid-handler and restarted, every event sent twice at once: one effect per event", async () => {
  const bundle = join(dirname(databaseFile()), "worker.mjs");
  writeFileSync(bundle, await bundleWorker("test/fixtures/cloudflare/sqlite-worker.ts"));
  const persist = dirname(databaseFile());
  const port = await freePort();
  const start = async (): Promise<Worker> => {
    // Its own process group, so that a kill takes workerd with it.
    const child = spawn(process.execPath, [join(root, "test/fixtures/cloudflare/d1-runner.mjs")], {
      cwd: root,
      env: { ...process.env, WORKER_BUNDLE: bundle, PERSIST: persist, PORT: String(port), WEBHOOK_SECRET: SECRET },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const worker: Worker = { child, output: "" };
    child.stdout?.on("data", (chunk: Buffer) => {
      worker.output += chunk;
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      worker.output += chunk;
    });
    for (let waited = 0; !worker.output.includes("listening"); waited += 50) {
      if (waited > 30_000 || child.exitCode !== null) throw new Error(`the Worker did not start:\n${worker.output}`);
      await sleep(50);
    }
    return worker;
  };
  const kill = async (worker: Worker) => {
    const exited = new Promise((done) => worker.child.once("exit", done));
    try {
      process.kill(-(worker.child.pid as number), "SIGKILL");
    } catch {
      // Already gone.
    }
    await exited;
  };
  const starts = (worker: Worker) => (worker.output.match(/start crash:/g) ?? []).length;

  let worker = await start();
  try {
    const statuses = new Map<number, number>();
    let broken = 0;
    const deliverUntilOk = async (text: string) => {
      for (let attempt = 0; attempt < 1000; attempt++) {
        try {
          const answer = await fetch(`http://127.0.0.1:${port}/webhooks`, {
            method: "POST",
            headers: { "content-type": "application/json", "service-signature": await signatureOf(SECRET, text) },
            body: text,
            signal: AbortSignal.timeout(10_000),
          });
          await answer.arrayBuffer();
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          if (answer.status >= 200 && answer.status < 300) return;
        } catch {
          broken++;
        }
        await sleep(50);
      }
      throw new Error("a delivery never got a 2xx");
    };
    const ids = Array.from({ length: 24 }, () => `crash:${randomUUID()}`);
    let sending = true;
    let kills = 0;
    let midHandler = 0;
    const killer = (async () => {
      for (let round = 0; sending && round < 3; round++) {
        const seen = starts(worker);
        for (let waited = 0; sending && starts(worker) === seen && waited < 10_000; waited += 2) await sleep(2);
        if (!sending) break;
        if (starts(worker) > seen) midHandler++;
        await kill(worker);
        kills++;
        worker = await start();
        await sleep(200);
      }
    })();
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < ids.length) {
          const text = body(ids[next++] as string);
          await Promise.all([deliverUntilOk(text), deliverUntilOk(text)]);
        }
      }),
    );
    sending = false;
    await killer;
    const rows = (await (await fetch(`http://127.0.0.1:${port}/effects-all`)).json()) as {
      event_id: string;
      n: number;
    }[];
    const effects = new Map(rows.map((row) => [row.event_id, row.n]));
    const lost = ids.filter((id) => !effects.has(id));
    const doubled = ids.filter((id) => (effects.get(id) ?? 0) > 1);
    console.log(
      `D1 crash test: ${ids.length} events × 2 copies, ${kills} Worker processes SIGKILLed (${midHandler} mid-handler), ` +
        `answers ${JSON.stringify(Object.fromEntries(statuses))}, ${broken} broken connections; ${lost.length} lost, ${doubled.length} doubled`,
    );
    expect(kills).toBeGreaterThanOrEqual(2);
    expect(midHandler).toBeGreaterThanOrEqual(2);
    expect(broken).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    expect(doubled).toEqual([]);
  } finally {
    await kill(worker);
  }
}, 120_000);
