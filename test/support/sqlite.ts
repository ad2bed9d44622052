import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import type { DedupeStore } from "flag-webhooks";
import { type AdapterName, adapterReceiver, type ReceiverOptions, type Send } from "./adapter-receivers.js";
import { startReceiverProcess } from "./crash.js";
import { signatureOf } from "./deliveries.js";
import { freePort } from "./free-port.js";
import { nodeFixture } from "./node-bundle.js";
import type { Started } from "./processes.js";

// Shared by the SQLite inbox's tests (test/stores/sqlite/): files in the clone, signed
// deliveries, a receiver of each adapter around an `onEvent` (made by adapter-receivers.ts, with
// this secret), and receiver processes (the fixture test/fixtures/sqlite-receiver.ts) on Node 20,
// 22, 24 or Bun, whose inboxes serve the store contract over HTTP.

const root = resolve(import.meta.dirname, "../..");
export const SQLITE_SECRET = "whsec-sqlite-inbox-test";

/** A new database path in a folder of its own under .test-results/ (inside the clone). */
export function databaseFile(name = "inbox.db"): string {
  const dir = join(root, ".test-results/sqlite", randomUUID());
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}

/** Whether a fresh read-only connection to `file` sees the inbox's row `id` committed. */
export function committedIn(file: string): (id: string) => boolean {
  return (id) => {
    const reader = new Database(file, { readonly: true });
    try {
      return reader.prepare("select 1 from flag_webhooks_inbox where id = ?").get(id) !== undefined;
    } finally {
      reader.close();
    }
  };
}

export const signBody = (text: string, secret = SQLITE_SECRET): Promise<string> => signatureOf(secret, text);

/** A receiver of the adapter with the SQLite tests' secret, running `onEvent` (with `maxAge` when given). */
export const receiver = (
  adapter: AdapterName,
  onEvent: ReceiverOptions["onEvent"],
  extra: { maxAge?: string; onError?: (error: unknown) => void } = {},
): Promise<Send> => adapterReceiver(adapter, { secret: SQLITE_SECRET, onEvent, ...extra });

/** The runtimes a receiver process runs on: this Node (20), Node 22 and 24 (tools/node-versions), Bun. */
export const RUNTIMES = {
  node20: process.execPath,
  node22: join(root, "tools/node-versions/node_modules/node22/bin/node"),
  node24: join(root, "tools/node-versions/node_modules/node24/bin/node"),
  bun: join(root, "node_modules/.bin/bun"),
} as const;
export type Runtime = keyof typeof RUNTIMES;

let bundled: Promise<string> | undefined;
/**
 * The receiver fixture bundled once (esbuild: ESM for Node and Bun, `flag-webhooks/*` from src/,
 * the drivers left to each runtime), so that it starts in tens of ms, and runs on Node 22 and Bun
 * without a TypeScript loader.
 */
export function receiverBundle(): Promise<string> {
  bundled ??= nodeFixture("sqlite-receiver", ["better-sqlite3", "@libsql/client", "bun:sqlite", "node:sqlite"]);
  return bundled;
}

/** A receiver process (test/fixtures/sqlite-receiver.ts) and what it printed. */
export interface ReceiverProcess extends Started {
  name: string;
  port: number;
}

/** Starts a receiver process on `runtime` with the fixture's environment (DRIVER, FILE, …). */
export async function startReceiver(
  runtime: Runtime,
  env: Record<string, string>,
  port?: number,
): Promise<ReceiverProcess> {
  const bundle = await receiverBundle();
  const chosen = port ?? (await freePort());
  const started = await startReceiverProcess(`the ${runtime} receiver`, RUNTIMES[runtime], [bundle], {
    cwd: root,
    env: { ...process.env, WEBHOOK_SECRET: SQLITE_SECRET, PORT: String(chosen), ...env },
  });
  return Object.assign(started, { name: env.NAME ?? "receiver", port: chosen });
}

/** Stops a receiver process, at once. */
export const stopReceiver = (receiver: ReceiverProcess): Promise<void> => receiver.kill();

/** One of a receiver process's inboxes, as a DedupeStore over HTTP (POST /store). */
export function remoteStore(receiver: ReceiverProcess, instance: "store" | "peer" | "other"): DedupeStore {
  const call = async (op: string, id: string, ms = 0) => {
    const answer = await fetch(`http://127.0.0.1:${receiver.port}/store`, {
      method: "POST",
      body: JSON.stringify({ instance, op, id, ms }),
    });
    const json = (await answer.json()) as { result?: unknown; error?: string };
    if (!answer.ok) throw new Error(json.error);
    return json.result;
  };
  return {
    claim: async (id, lease) => (await call("claim", id, lease)) as never,
    complete: async (id, ttl) => void (await call("complete", id, ttl)),
    release: async (id) => void (await call("release", id)),
  };
}

/**
 * `db` seen through a proxy that counts the transactions that wrote (the connection's count of
 * changed rows moved), whether ended by a COMMIT, prepared or inside an `exec`, or by SQLite
 * committing a statement run on its own: what group commit saves.
 */
export function commitCounting(db: Database.Database): { connection: Database.Database; commits: () => number } {
  // A transaction is counted once it ended having written: after any call on the connection,
  // none is open and the count of changed rows moved. So an explicit COMMIT counts, and so does a
  // statement SQLite committed on its own.
  let commits = 0;
  const changes = db.prepare("select total_changes() as n");
  let changed = 0;
  const ended = () => {
    if (db.inTransaction) return;
    const now = (changes.get() as { n: number }).n;
    if (now !== changed) commits++;
    changed = now;
  };
  const counted = (statement: Database.Statement) =>
    new Proxy(statement, {
      get(target, key) {
        const value = Reflect.get(target, key, target);
        if (key === "run" || key === "all" || key === "get") {
          return (...args: unknown[]) => {
            try {
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            } finally {
              ended();
            }
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const connection = new Proxy(db, {
    get(target, key) {
      if (key === "prepare") return (sql: string) => counted(target.prepare(sql));
      if (key === "exec") {
        return (sql: string) => {
          try {
            return target.exec(sql);
          } finally {
            ended();
          }
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { connection, commits: () => commits };
}
