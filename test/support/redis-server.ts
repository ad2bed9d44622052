import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.js";

/**
 * A real redis-server for the tests that claim Redis: started on a free loopback port in a
 * temporary folder, with no persistence, and stopped by pid. Where redis-server is missing the
 * Redis suites are skipped with a loud reason; with CI=true a missing server is a failure.
 */
export interface RedisServer {
  port: number;
  url: string;
  pid: number;
  /** Its temporary working folder, removed by {@link stopRedis}. */
  dir: string;
  /** Stops the server (SIGKILL when `hard`, as a crash); the port stays reserved for a restart. */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port: empty, unless started with persistence (`extraArgs`). */
  restart(): Promise<void>;
}

/** Whether redis-server is installed; if not, why the Redis tests do not run. */
export function redisAvailability(): { available: true } | { available: false; reason: string } {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "pipe" });
    return { available: true };
  } catch {
    const reason =
      "redis-server is not installed, so the Redis tests did not run (apt-get install -y redis-server; .ci/run does)";
    if (process.env.CI === "true") throw new Error(`${reason}. With CI=true this is a failure, not a skip.`);
    console.warn(`\n*** ${reason} ***\n`);
    return { available: false, reason };
  }
}

/**
 * @param extraArgs more redis-server options, after the defaults so they win: for instance
 * `["--appendonly", "yes", "--appendfsync", "always"]` for a server whose acknowledged writes
 * survive a crash and `restart()`.
 */
export async function startRedis(
  extraArgs: readonly string[] | (() => Promise<readonly string[]>) = [],
): Promise<RedisServer> {
  let port = 0;
  let dir = "";
  let args: readonly string[] = [];
  let child: ChildProcess;

  async function launch(): Promise<void> {
    child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...args],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 10_000);
      child.stdout?.on("data", (chunk: Buffer) => {
        output += chunk;
        if (output.includes("Ready to accept connections")) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${output}`));
      });
    });
  }

  async function stop(hard = false): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    process.kill(child.pid as number, hard ? "SIGKILL" : "SIGTERM");
    await exited;
  }

  // A port free when asked may be taken before redis-server binds it (another process's outgoing
  // connection, on a busy machine): such a start is tried again on fresh ports and a fresh folder
  // (a cluster node's half-written nodes.conf stays behind), three times at most.
  for (let tries = 1; ; tries++) {
    port = await freePort();
    args = typeof extraArgs === "function" ? await extraArgs() : extraArgs;
    dir = mkdtempSync(join(tmpdir(), "flag-webhooks-redis-"));
    try {
      await launch();
      break;
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      if (tries === 3 || !String(error).includes("Address already in use")) throw error;
    }
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get pid() {
      return child.pid as number;
    },
    stop,
    async restart() {
      await stop();
      await launch();
    },
  };
}

/** Stops a server and removes its folder. */
export async function stopRedis(server: RedisServer | undefined): Promise<void> {
  await server?.stop(true);
  if (server) rmSync(server.dir, { recursive: true, force: true });
}
