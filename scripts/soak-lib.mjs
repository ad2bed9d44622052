// What the soak scripts share: the event each delivery carries, a free loopback port, and a
// redis-server of their own (started on that port in a temporary folder, stopped by pid).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The body of soak delivery `n`: a valid flag.updated event whose id is `evt_<n>`. */
export function soakEvent(n) {
  return Buffer.from(
    JSON.stringify({
      id: `evt_${n}`,
      type: "flag.updated",
      createdAt: "2026-11-21T09:30:00Z",
      environment: "production",
      data: {
        flag: `flag-${n % 100}`,
        changes: [{ path: "on", from: false, to: true }],
        actor: { type: "user", email: "soak@example.com" },
      },
    }),
  );
}

export async function freePort() {
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * Starts redis-server on a free loopback port; `appendonly` turns on AOF persistence; `cpus` (a
 * taskset list such as "1") starts it under `taskset -c`, pinned to those CPUs with all its
 * threads. `stop()` kills it and waits; `kill()` does the same synchronously, for a process "exit"
 * handler. `pid` is redis-server's (taskset execs it in place).
 */
export async function startRedisServer({ appendonly = false, cpus } = {}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-soak-redis-"));
  const command = cpus === undefined ? ["redis-server"] : ["taskset", "-c", String(cpus), "redis-server"];
  const child = spawn(
    command[0],
    [
      ...command.slice(1),
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      appendonly ? "yes" : "no",
      "--dir",
      dir,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let output = "";
  await new Promise((resolve, reject) => {
    child.once("error", (error) =>
      reject(new Error(`cannot start redis-server (${error.message}); apt-get install -y redis-server`)),
    );
    child.stdout.on("data", (chunk) => {
      output += chunk;
      if (output.includes("Ready to accept connections")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`redis-server exited with ${code}:\n${output}`)));
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  const kill = () => {
    if (running()) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    port,
    pid: child.pid,
    url: `redis://127.0.0.1:${port}`,
    kill,
    async stop() {
      const exited = running() ? new Promise((resolve) => child.once("exit", resolve)) : undefined;
      kill();
      await exited;
    },
  };
}
