import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { root } from "./packed.js";

/** The fenced code blocks of a page (a path from the repository's root) in one language, in order. */
export function codeBlocks(page: string, lang = "ts"): string[] {
  const text = readFileSync(join(root, page), "utf8");
  return [...text.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\``, "gm"))].map(([, code]) => code ?? "");
}

/**
 * `code` with the port a page's example listens on (`listen(3000)`, `port: 3000`) or connects to
 * (`port: 6379`) replaced by one a test started: the only change made to an example before it runs.
 * Fails when the page no longer has that port, so a changed page cannot slip through untested.
 */
export function withPort(code: string, from: number, to: number): string {
  const pattern = new RegExp(`(listen\\(|port: )${from}\\b`, "g");
  if (!pattern.test(code)) throw new Error(`the example has no port ${from} to replace`);
  return code.replace(pattern, `$1${to}`);
}

/** A process run by tsx in a project, with its output kept. */
export interface Run {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code once the process ended. */
  exited: Promise<number | null>;
}

/**
 * Runs `file` with tsx (the repository's) in `cwd`, as a user runs `npx tsx file`: Node with tsx's
 * loader, in one process (the tsx command would start a second one), so that a signal reaches the
 * program itself. `nodeArgs` go before the file (`--import ./telemetry.ts`).
 */
export function tsx(cwd: string, file: string, env: Record<string, string> = {}, nodeArgs: string[] = []): Run {
  const loader = pathToFileURL(join(root, "node_modules/tsx/dist/loader.mjs")).href;
  const child = spawn(process.execPath, ["--import", loader, ...nodeArgs, file], {
    cwd,
    env: { ...process.env, NODE_OPTIONS: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Runs `file` to its end and resolves with its exit code and output. */
export async function tsxToEnd(
  cwd: string,
  file: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; output: string }> {
  const run = tsx(cwd, file, env);
  const code = await run.exited;
  return { code, output: run.output() };
}

/** Resolves once something accepts connections on the loopback `port`; rejects if `run` ends first. */
export async function listening(run: Run, port: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void run.exited.then(() => {
    ended = true;
  });
  while (Date.now() < deadline) {
    if (ended) throw new Error(`the example ended before it listened on ${port}:\n${run.output()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    await sleep(100);
  }
  throw new Error(`the example did not listen on ${port} within ${timeoutMs} ms:\n${run.output()}`);
}

/** Ends a process this test started, and waits for it. */
export async function stop(run: Run): Promise<void> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill("SIGKILL");
  await run.exited;
}
