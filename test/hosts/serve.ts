import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { type Started, startProcess, untilAnswering } from "../support/processes.js";

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

/** A host's program, started in a process group of its own (see startProcess). */
function start(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Running & { started: Started } {
  const started = startProcess(command, args, { cwd, env, group: true });
  return {
    started,
    output: () => started.output,
    stop: () => started.stop(5_000),
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
  await child.started.exited;
  clearTimeout(timer);
  if (child.started.ended !== "exited with 0") throw new Error(`${label} ${child.started.ended}:\n${child.output()}`);
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
  await untilAnswering(label, child.started, `http://127.0.0.1:${port}/`, {
    within: 60_000,
    attempt: 2_000,
    poll: 100,
  });
  return child;
}
