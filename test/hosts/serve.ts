import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

// Starting and stopping the hosts' own programs (their build commands and servers) for
// hosts.test.ts: each runs as a child process in its own process group, so stopping it also stops
// the workers it started (Next.js runs its server apart from the `next start` that launched it).

/** The repository's root, and this package's directory (where the apps and their node_modules are). */
export const root = resolve(import.meta.dirname, "../..");
export const hosts = resolve(import.meta.dirname);

/** A binary of this package's node_modules (`next`, `vite`, ...). */
export const hostBin = (name: string): string => join(hosts, "node_modules/.bin", name);
/** A binary of the repository's own devDependencies (`bun`, `deno`). */
export const rootBin = (name: string): string => join(root, "node_modules/.bin", name);

/**
 * The Node a host runs on: this one when the framework supports it, else Node 24 from
 * tools/node-versions (SvelteKit 3, React Router 8 and Astro 7 need Node 22 or later).
 */
export function nodeFor(minimumMajor: number): string {
  if (Number(process.versions.node.split(".")[0]) >= minimumMajor) return process.execPath;
  const node24 = join(root, "tools/node-versions/node_modules/node24/bin/node");
  if (!existsSync(node24)) {
    throw new Error(`this host needs Node ${minimumMajor} or later: run npm install --prefix tools/node-versions`);
  }
  return node24;
}

/** Environment for every host: no telemetry, no update checks, no colours in the output read back. */
export function hostEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    NEXT_TELEMETRY_DISABLED: "1",
    ASTRO_TELEMETRY_DISABLED: "1",
    DO_NOT_TRACK: "1",
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    NODE_ENV: "production",
    ...extra,
  };
}

/** A host's process: what it printed so far, and a way to stop it and everything it started. */
export interface Running {
  output(): string;
  stop(): Promise<void>;
}

function start(
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Running & { ended(): string | undefined; exited: Promise<void> } {
  const child: ChildProcess = spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const append = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  let ended: string | undefined;
  const exited = new Promise<void>((ok) => {
    child.once("exit", (code, signal) => {
      ended = `exited with ${code ?? signal}`;
      ok();
    });
    child.once("error", (error) => {
      ended ??= `could not start: ${error.message}`;
      ok();
    });
  });
  const signal = (name: NodeJS.Signals) => {
    // The whole group: the host's own workers too. Gone already is fine.
    try {
      if (child.pid !== undefined) process.kill(-child.pid, name);
    } catch {}
  };
  return {
    output: () => output,
    ended: () => ended,
    exited,
    async stop() {
      signal("SIGTERM");
      const timer = setTimeout(() => signal("SIGKILL"), 5_000);
      if (ended === undefined) await exited;
      clearTimeout(timer);
      // A worker that outlived its parent's exit.
      signal("SIGKILL");
    },
  };
}

/** Runs a build (or any command) to completion; rejects with its output if it fails. */
export async function run(
  label: string,
  command: string,
  args: string[],
  cwd: string,
  env = hostEnv(),
): Promise<string> {
  const child = start(command, args, cwd, env);
  const timer = setTimeout(() => void child.stop(), 180_000);
  await child.exited;
  clearTimeout(timer);
  if (child.ended() !== "exited with 0") throw new Error(`${label} ${child.ended()}:\n${child.output()}`);
  return child.output();
}

/**
 * Starts a host's server and waits until it answers HTTP on `port` (any status): a server that
 * exits first, or does not answer within 60 s, fails with what it printed.
 */
export async function serve(
  label: string,
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  port: number,
): Promise<Running> {
  const child = start(command, args, cwd, env);
  const url = `http://127.0.0.1:${port}/`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.ended() !== undefined)
      throw new Error(`${label} ${child.ended()} before answering on ${url}:\n${child.output()}`);
    try {
      await fetch(url, { signal: AbortSignal.timeout(2_000) });
      return child;
    } catch {
      if (Date.now() > deadline) {
        await child.stop();
        throw new Error(`${label} did not answer on ${url} within 60 s:\n${child.output()}`);
      }
      await new Promise((ok) => setTimeout(ok, 100));
    }
  }
}
