import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

// The child processes the tests start (receivers, example servers, the hosts' builds and
// servers): one way to spawn one, read what it printed, know why it ended and stop it, so that
// every test stops its processes alike and none outlives the test that started it.

/** A child process the test started, and what it printed so far (stdout and stderr together). */
export interface Started {
  child: ChildProcess;
  output: string;
  /** Why it is gone (its exit status or signal, or why it could not start), once it is. */
  ended: string | undefined;
  /** Settles once it is gone. */
  exited: Promise<void>;
  /** Whether it leads a process group of its own (spawned with `group`), which a signal reaches whole. */
  group: boolean;
  /** Sends `name` to it, or to its whole group; one already gone is no error. */
  signal(name: NodeJS.Signals): void;
  /**
   * SIGTERM, then SIGKILL if it is still there after `grace` ms; settles once it is gone, and
   * then SIGKILLs what is left of its group.
   */
  stop(grace?: number): Promise<void>;
  /** SIGKILL at once (a crash), to its whole group if it leads one; settles once it is gone. */
  kill(): Promise<void>;
}

/**
 * Spawns `command` with its output piped and collected; with `group`, in a process group of its
 * own, so that a signal also reaches the processes it starts (Next.js's server, workerd).
 */
export function startProcess(
  command: string,
  args: string[],
  options: Omit<SpawnOptions, "detached" | "stdio"> & { group?: boolean } = {},
): Started {
  const { group = false, ...spawnOptions } = options;
  const child = spawn(command, args, { ...spawnOptions, detached: group, stdio: ["ignore", "pipe", "pipe"] });
  const started: Started = {
    child,
    output: "",
    ended: undefined,
    group,
    exited: new Promise<void>((done) => {
      child.once("exit", (code, signal) => {
        started.ended = `exited with ${code ?? signal}`;
        done();
      });
      child.once("error", (error) => {
        started.ended ??= `could not start: ${error.message}`;
        done();
      });
    }),
    signal(name) {
      try {
        if (child.pid !== undefined) process.kill(group ? -child.pid : child.pid, name);
      } catch {
        // Gone already.
      }
    },
    async stop(grace = 5_000) {
      if (started.ended === undefined) {
        started.signal("SIGTERM");
        const timer = setTimeout(() => started.signal("SIGKILL"), grace);
        await started.exited;
        clearTimeout(timer);
      }
      // A process it started may outlive it: nothing of its group is left.
      if (group) started.signal("SIGKILL");
    },
    async kill() {
      if (started.ended === undefined || group) started.signal("SIGKILL");
      await started.exited;
    },
  };
  const append = (chunk: Buffer) => {
    started.output += chunk.toString();
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  return started;
}

/**
 * Waits until `started` has printed `text` (looking every `poll` ms, for at most `within` ms);
 * throws, with what it printed, if it ends first or takes longer.
 */
export async function untilPrinted(
  label: string,
  started: Started,
  text: string,
  { within = 20_000, poll = 20 } = {},
): Promise<void> {
  for (let waited = 0; !started.output.includes(text); waited += poll) {
    if (waited > within || started.ended !== undefined) throw new Error(`${label} did not start:\n${started.output}`);
    await sleep(poll);
  }
}

/**
 * Waits until a server `started` answers HTTP at `url`, with any status (each try given
 * `attempt` ms, one every `poll` ms, for at most `within` ms); if it ends first, or does not
 * answer in time (then it is stopped), throws with what it printed.
 */
export async function untilAnswering(
  label: string,
  started: Started,
  url: string,
  { within = 20_000, attempt = 1_000, poll = 50 } = {},
): Promise<void> {
  const deadline = Date.now() + within;
  for (;;) {
    if (started.ended !== undefined) {
      throw new Error(`${label} ${started.ended} before answering on ${url}:\n${started.output}`);
    }
    try {
      await fetch(url, { signal: AbortSignal.timeout(attempt) });
      return;
    } catch {
      if (Date.now() > deadline) {
        await started.stop();
        throw new Error(`${label} did not answer on ${url} within ${within / 1000} s:\n${started.output}`);
      }
      await sleep(poll);
    }
  }
}
