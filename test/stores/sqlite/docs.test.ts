import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { eventJson } from "../../support/deliveries.js";
import { freePort } from "../../support/free-port.js";
import { databaseFile, RUNTIMES, signBody } from "../../support/sqlite.js";

// docs/sqlite.md's first example, run as it is pasted (the built package, Express, node:sqlite,
// Node 24 running the TypeScript as it is), and `npm run demo` on Node 22, where it keeps its ids
// in a SQLite file and a restarted receiver answers a redelivery as a duplicate.

const root = resolve(import.meta.dirname, "../../..");
const built = existsSync(join(root, "dist/sqlite.js"));

it("docs/sqlite.md's first example runs as pasted on Node 24: a delivery writes its audit row once", async () => {
  expect(built, "dist is not built: run npm run build").toBe(true);
  const page = readFileSync(join(root, "docs/sqlite.md"), "utf8");
  const code = /```ts\n([\s\S]*?)```/.exec(page)?.[1] ?? "";
  expect(code).toContain('new DatabaseSync("app.db")');
  // In a folder of the clone: `flag-webhooks` resolves to the built package by its own name.
  const dir = dirname(databaseFile());
  writeFileSync(join(dir, "app.ts"), code);
  const port = await freePort();
  const secret = "whsec-docs-sqlite";
  const child = spawn(RUNTIMES.node24, ["app.ts"], {
    cwd: dir,
    env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk;
  });
  try {
    const deliver = async (id: string) => {
      const text = eventJson(id);
      return fetch(`http://127.0.0.1:${port}/webhooks`, {
        method: "POST",
        headers: { "content-type": "application/json", "service-signature": await signBody(text, secret) },
        body: text,
      });
    };
    const id = `evt_${randomUUID()}`;
    let first: Response | undefined;
    for (let waited = 0; !first && waited < 20_000; waited += 100) {
      first = await deliver(id).catch(() => undefined);
      if (!first) await sleep(100);
    }
    expect(first?.status, output).toBe(204);
    const copy = await deliver(id);
    expect([copy.status, copy.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    const db = new Database(join(dir, "app.db"), { readonly: true });
    expect(db.prepare("select event_id, flag from audit").all()).toEqual([{ event_id: id, flag: "new-checkout" }]);
    db.close();
  } finally {
    child.kill("SIGKILL");
  }
});

it("npm run demo on Node 22 keeps its ids in a SQLite file: the restarted receiver answers a redelivery as a duplicate", async () => {
  expect(built, "dist is not built: run npm run build").toBe(true);
  const { stdout } = await promisify(execFile)(
    RUNTIMES.node22,
    [join(root, "node_modules/tsx/dist/cli.mjs"), "scripts/demo.ts"],
    { cwd: root, encoding: "utf8", timeout: 60_000 },
  );
  expect(stdout).toContain("ids kept in");
  expect(stdout).toContain("(node:sqlite)");
  expect(stdout).toContain("the restarted receiver read its ids from the SQLite file");
  expect(stdout).not.toContain("✗");
  expect(stdout).toContain("Everything happened as promised.");
}, 90_000);
