import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { eventJson } from "../../support/deliveries.js";
import {
  databaseFile,
  type ReceiverProcess,
  type Runtime,
  remoteStore,
  signBody,
  startReceiver,
  stopReceiver,
} from "../../support/sqlite.js";
import { describeStoreContract } from "../../support/store-contract.js";

// The drivers built into a runtime, each in a receiver process of its own runtime
// (test/fixtures/sqlite-receiver.ts, bundled from src/): node:sqlite on Node 22 and 24, and
// bun:sqlite on Bun. The DedupeStore contract runs here against the process's inboxes over HTTP;
// deliveries go to its receiver, and the test reads the file it writes with better-sqlite3.

const DRIVERS: [runtime: Runtime, driver: string][] = [
  ["node22", "node:sqlite"],
  ["node24", "node:sqlite"],
  ["bun", "bun:sqlite"],
];

const started: ReceiverProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map(stopReceiver));
});

for (const [runtime, driver] of DRIVERS) {
  let process_: ReceiverProcess;
  let file: string;
  describeStoreContract(
    `SqliteInbox over ${driver} on ${runtime} (in its own process)`,
    {
      shared: true,
      scoped: true,
      async make() {
        file = databaseFile();
        process_ = await startReceiver(runtime, { DRIVER: driver, FILE: file, WAL: "1", SCOPE: "runtime" });
        started.push(process_);
        return {
          store: remoteStore(process_, "store"),
          peer: remoteStore(process_, "peer"),
          otherScope: remoteStore(process_, "other"),
        };
      },
    },
    () => {
      it("handles a delivery once through tx: one effect row, the copy a duplicate, a throw rolled back", async () => {
        const deliver = async (id: string) => {
          const text = eventJson(id);
          return fetch(`http://127.0.0.1:${process_.port}/webhooks`, {
            method: "POST",
            headers: { "content-type": "application/json", "service-signature": await signBody(text) },
            body: text,
          });
        };
        const reader = new Database(file, { readonly: true });
        const effects = (id: string) =>
          (reader.prepare("select count(*) as n from effects where event_id = ?").get(id) as { n: number }).n;
        try {
          const id = `evt_${randomUUID()}`;
          expect((await deliver(id)).status).toBe(204);
          const copy = await deliver(id);
          expect([copy.status, copy.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
          expect(effects(id)).toBe(1);
          const failing = `throw:${randomUUID()}`;
          expect((await deliver(failing)).status).toBe(500);
          expect(effects(failing)).toBe(0);
          expect((await deliver(failing)).status).toBe(204);
          expect(effects(failing)).toBe(1);
          // Ten ids, each sent three times at once: the connection's transactions take turns.
          const ids = Array.from({ length: 10 }, () => `evt_${randomUUID()}`);
          const answers = await Promise.all(ids.flatMap((each) => [deliver(each), deliver(each), deliver(each)]));
          expect(answers.every((answer) => answer.status === 204)).toBe(true);
          for (const each of ids) expect(effects(each)).toBe(1);
          expect(process_.output).not.toContain("unhandled rejection");
        } finally {
          reader.close();
        }
      });
    },
  );
}

describe("the runtimes the SQLite drivers run on", () => {
  it("are the versions this page says: node:sqlite from Node 22.5, better-sqlite3 12 on Node 20", async () => {
    const { execFileSync } = await import("node:child_process");
    const { RUNTIMES } = await import("../../support/sqlite.js");
    const versions = Object.fromEntries(
      (["node22", "node24", "bun"] as const).map((name) => [
        name,
        execFileSync(RUNTIMES[name], ["--version"], { encoding: "utf8" }).trim(),
      ]),
    );
    expect(versions.node22).toMatch(/^v22\.(\d+)/);
    expect(Number(/^v22\.(\d+)/.exec(versions.node22 ?? "")?.[1])).toBeGreaterThanOrEqual(5);
    expect(versions.node24).toMatch(/^v24\./);
    expect(versions.bun).toMatch(/^1\./);
    expect(process.version).toMatch(/^v20\./);
  });
});
