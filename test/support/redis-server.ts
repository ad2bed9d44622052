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
export async function startRedis(extraArgs: readonly string[] = []): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-redis-"));
  let child: ChildProcess;

  async function launch(): Promise<void> {
    child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...extraArgs],
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

  await launch();
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
