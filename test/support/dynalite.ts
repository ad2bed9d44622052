import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  CreateTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import dynalite from "dynalite";
import { dedupeTable } from "flag-webhooks/dynamodb";

/**
 * dynalite, an implementation of the DynamoDB API on LevelDB (in memory here), served from this
 * process on a free loopback port, with the dedupe table created from the exported definition.
 */
export interface Dynalite {
  endpoint: string;
  table: string;
  /** A new client, as each receiver instance has its own; destroyed by {@link stopDynalite}. */
  client(config?: DynamoDBClientConfig): DynamoDBClient;
  /** The item under `pk`, read strongly consistent. */
  item(pk: string): Promise<Record<string, unknown> | undefined>;
  /** Every item whose key starts with `prefix`. */
  items(prefix: string): Promise<Record<string, unknown>[]>;
  server: Server;
  clients: DynamoDBClient[];
}

// Fake credentials for a local endpoint: dynalite checks that a request is signed, not by whom.
export const LOCAL = { region: "local", credentials: { accessKeyId: "local", secretAccessKey: "local" } };

export async function startDynalite(table = "flag-webhooks-dedupe"): Promise<Dynalite> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
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
    server,
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
  db.server.closeAllConnections?.();
  await new Promise<void>((resolve) => db.server.close(() => resolve()));
}
