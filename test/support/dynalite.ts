import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import {
  CreateTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import { dedupeTable } from "flag-webhooks/dynamodb";

/**
 * A DynamoDB API served locally for a test (dynalite here, AWS's DynamoDB Local in
 * ./dynamodb-local.ts), with the dedupe table created from the exported definition.
 */
export interface LocalDynamoDB {
  endpoint: string;
  table: string;
  /** A new client, as each receiver instance has its own; destroyed by {@link stopDynalite}. */
  client(config?: DynamoDBClientConfig): DynamoDBClient;
  /** The item under `pk`, read strongly consistent. */
  item(pk: string): Promise<Record<string, unknown> | undefined>;
  /** Every item whose key starts with `prefix`. */
  items(prefix: string): Promise<Record<string, unknown>[]>;
  clients: DynamoDBClient[];
}

/**
 * dynalite, an implementation of the DynamoDB API on LevelDB (in memory here), served on a free
 * loopback port from a thread of its own.
 */
export interface Dynalite extends LocalDynamoDB {
  /** The thread serving it, ended by {@link stopDynalite}. */
  thread: Worker;
}

// Fake credentials for a local endpoint: dynalite checks that a request is signed, not by whom.
export const LOCAL = { region: "local", credentials: { accessKeyId: "local", secretAccessKey: "local" } };

// Served from a thread rather than from the test's own event loop: a request costs the SDK and
// dynalite each about 2 ms of CPU, so on one loop the requests of deliveries sent at once queued
// behind each other (measured: 0.5 ms a request in dynalite alone, 20 ms a request inside an
// order property run), and the waiting deliveries' pauses then stretched to match.
const SERVE = `
const { parentPort, workerData } = require("node:worker_threads");
const server = require(workerData.dynalite)({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));
`;

/**
 * A client of `db` that counts the commands sent through it (a middleware on the SDK's own
 * stack), for the tests and benchmarks that count a delivery's requests: `sent()` how many,
 * `names` each one's command name in order (once each, whatever the SDK retries).
 */
export function countedClient(db: LocalDynamoDB): { client: DynamoDBClient; sent: () => number; names: string[] } {
  const client = db.client();
  const names: string[] = [];
  client.middlewareStack.add(
    (next, context) => (args) => {
      names.push(String(context.commandName).replace(/Command$/, ""));
      return next(args);
    },
    { step: "initialize" },
  );
  return { client, sent: () => names.length, names };
}

export async function startDynalite(table = "flag-webhooks-dedupe"): Promise<Dynalite> {
  const thread = new Worker(SERVE, {
    eval: true,
    workerData: { dynalite: createRequire(import.meta.url).resolve("dynalite") },
  });
  const port = await new Promise<number>((resolve, reject) => {
    thread.once("message", resolve);
    thread.once("error", reject);
  });
  return { ...(await withTable(`http://127.0.0.1:${port}`, table)), thread };
}

/** The clients and the dedupe table `table` of a local DynamoDB API at `endpoint`, the table created now. */
export async function withTable(endpoint: string, table: string): Promise<LocalDynamoDB> {
  const clients: DynamoDBClient[] = [];
  const client = (config: DynamoDBClientConfig = {}) => {
    const made = new DynamoDBClient({ ...LOCAL, endpoint, ...config });
    clients.push(made);
    return made;
  };
  const admin = client();
  // CreateTable takes all of the definition but TTL (UpdateTimeToLive, which dynalite lacks).
  const { TimeToLiveSpecification: _ttl, ...definition } = dedupeTable;
  await admin.send(
    new CreateTableCommand({
      TableName: table,
      ...definition,
      AttributeDefinitions: [...definition.AttributeDefinitions],
      KeySchema: [...definition.KeySchema],
    }),
  );
  return {
    endpoint,
    table,
    client,
    clients,
    async item(pk) {
      const { Item } = await admin.send(
        new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }),
      );
      return Item;
    },
    async items(prefix) {
      const { Items = [] } = await admin.send(
        new ScanCommand({
          TableName: table,
          FilterExpression: "begins_with(pk, :prefix)",
          ExpressionAttributeValues: { ":prefix": { S: prefix } },
          ConsistentRead: true,
        }),
      );
      return Items;
    },
  };
}

export async function stopDynalite(db: Dynalite | undefined): Promise<void> {
  if (!db) return;
  for (const client of db.clients.splice(0)) client.destroy();
  await db.thread.terminate();
}
