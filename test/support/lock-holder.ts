import { resolve } from "node:path";
import { type Started, startProcess, untilPrinted } from "./processes.js";

// Another process that holds a SQLite file's write lock for a while and then lets go by itself:
// what an app's statement, with a busy_timeout longer than that, waits out. In a process of its
// own, so the lock is really held against this one: SQLite's locks are POSIX locks, which do not
// keep out another connection of the same process opened through a second copy of SQLite (a
// better-sqlite3 holder beside a libSQL client would hold nothing).

const root = resolve(import.meta.dirname, "../..");

/** A process holding a file's write lock (better-sqlite3, BEGIN IMMEDIATE). */
export interface LockHolder {
  /** Settles once the process has let go (rolled back), `ms` after it took the lock. */
  released(): Promise<void>;
  /** Stops the process at once. */
  stop(): Promise<void>;
}

/** Starts a process that takes `file`'s write lock, resolving once it holds it; it lets go `ms` later. */
export async function holdWriteLock(file: string, ms: number): Promise<LockHolder> {
  const script = `
    const db = new (require("better-sqlite3"))(process.argv[1]);
    db.exec("begin immediate");
    console.log("held");
    setTimeout(() => { db.exec("rollback"); console.log("released"); }, Number(process.argv[2]));
    setInterval(() => {}, 60000);`;
  const holder: Started = startProcess(process.execPath, ["-e", script, file, String(ms)], { cwd: root });
  await untilPrinted("the process that holds the write lock", holder, "held");
  return {
    released: () => untilPrinted("the process that holds the write lock", holder, "released"),
    stop: () => holder.kill(),
  };
}
