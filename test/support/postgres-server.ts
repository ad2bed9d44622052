import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "./free-port.js";

/**
 * A real PostgreSQL server for the tests of flag-webhooks/postgres: Debian's `postgresql` package
 * (.ci/run installs it), a new cluster made by initdb in a temporary folder, started on a free
 * loopback port with trust auth, and stopped by pid. PostgreSQL refuses to run as root, and CI
 * runs as root: then initdb and postgres run as the `postgres` user (runuser), in a folder it
 * owns. Where the binaries are missing the suites are skipped with a loud reason; with CI=true a
 * missing server is a failure.
 */
export interface PostgresServer {
  port: number;
  /** A connection string for the `postgres` superuser and database. */
  url: string;
  pid: number;
  /** The temporary folder (cluster and socket), removed by {@link stopPostgres}. */
  dir: string;
  /** Stops the server (SIGKILL when `hard`, as a crash); the port stays reserved for a restart. */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port, with the data it had (crash recovery after a hard stop). */
  restart(): Promise<void>;
}

/** The folder of Debian's PostgreSQL binaries, the newest version installed, or undefined. */
function binDir(): string | undefined {
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((name) => existsSync(join(base, name, "bin", "postgres")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], "bin");
}

/** Whether PostgreSQL is installed; if not, why the Postgres tests do not run. */
export function postgresAvailability(): { available: true } | { available: false; reason: string } {
  if (binDir()) return { available: true };
  const reason =
    "PostgreSQL is not installed, so the Postgres tests did not run (apt-get install -y postgresql; .ci/run does)";
  if (process.env.CI === "true") throw new Error(`${reason}. With CI=true this is a failure, not a skip.`);
  console.warn(`\n*** ${reason} ***\n`);
  return { available: false, reason };
}

const isRoot = () => process.getuid?.() === 0;

/** A command as the user that may run PostgreSQL: `postgres` under root, else ourselves. */
function asServerUser(command: string, args: string[]): [string, string[]] {
  return isRoot() ? ["runuser", ["-u", "postgres", "--", command, ...args]] : [command, args];
}

/**
 * Makes a cluster and starts it; `extraSettings` are more `-c name=value` options.
 */
export async function startPostgres(extraSettings: Record<string, string> = {}): Promise<PostgresServer> {
  const bin = binDir();
  if (!bin) throw new Error("PostgreSQL is not installed");
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-pg-"));
  const data = join(dir, "data");
  if (isRoot()) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
  }
  chmodSync(dir, 0o700);
  const [initCommand, initArgs] = asServerUser(join(bin, "initdb"), [
    "-D",
    data,
    "-U",
    "postgres",
    "--auth=trust",
    "--encoding=UTF8",
    "--locale=C",
    "--no-sync",
  ]);
  execFileSync(initCommand, initArgs, { stdio: "pipe" });
  let child: ChildProcess;

  async function launch(): Promise<void> {
    const settings = {
      listen_addresses: "127.0.0.1",
      port: String(port),
      unix_socket_directories: dir,
      max_connections: "200",
      shared_buffers: "32MB",
      // Faster commits for tests, and a committed transaction still survives a SIGKILL of the
      // server: COMMIT writes the WAL to the OS before it answers (synchronous_commit stays on),
      // only the fsync to the disk is skipped (which only a crash of the machine would need).
      fsync: "off",
      ...extraSettings,
    };
    const args = ["-D", data, ...Object.entries(settings).flatMap(([name, value]) => ["-c", `${name}=${value}`])];
    const [command, commandArgs] = asServerUser(join(bin as string, "postgres"), args);
    child = spawn(command, commandArgs, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`postgres did not start:\n${output}`)), 30_000);
      const onData = (chunk: Buffer) => {
        output += chunk;
        if (output.includes("database system is ready to accept connections")) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`postgres exited with ${code}:\n${output}`));
      });
    });
  }

  async function stop(hard = false): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    // Under runuser the pid is runuser's, which passes SIGTERM on; a SIGKILL it cannot pass, so
    // the postmaster's own pid (first line of postmaster.pid) is signalled.
    const pidFile = join(data, "postmaster.pid");
    let pid = child.pid as number;
    if (existsSync(pidFile)) {
      const first = readFileSync(pidFile, "utf8").split("\n")[0]?.trim() ?? "";
      if (/^\d+$/.test(first)) pid = Number(first);
    }
    try {
      process.kill(pid, hard ? "SIGKILL" : "SIGTERM");
    } catch {
      // Already gone.
    }
    if (hard && pid !== child.pid) {
      // The postmaster's children die with it soon; runuser exits once its child did.
      await sleep(50);
    }
    await exited;
  }

  await launch();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    dir,
    get pid() {
      return child.pid as number;
    },
    stop,
    async restart() {
      await stop();
      // After a SIGKILL the old backends may hold the shared memory a moment longer.
      for (let attempt = 0; ; attempt++) {
        try {
          await launch();
          return;
        } catch (error) {
          if (attempt >= 20) throw error;
          await sleep(250);
        }
      }
    },
  };
}

/** Stops a server and removes its folder. */
export async function stopPostgres(server: PostgresServer | undefined): Promise<void> {
  await server?.stop(true);
  if (server) rmSync(server.dir, { recursive: true, force: true });
}
