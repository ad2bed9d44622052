import { randomUUID } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDedupeStore, DynamoDBOrderStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCAL } from "../../support/dynalite.js";
import {
  type DynamoDBLocal,
  dynamodbLocalAvailability,
  startDynamoDBLocal,
  stopDynamoDBLocal,
} from "../../support/dynamodb-local.js";
import { SECRET } from "../../support/receiver.js";

// What DynamoDB answers when a request meets a transaction under way on the same item: a single
// write is refused with TransactionConflictException, and a transaction is cancelled with the
// reason TransactionConflict. Neither is retried by the SDK. A proxy in front of DynamoDB Local
// answers the chosen request so, as DynamoDB does (its JSON error), instead of passing it on.

const availability = dynamodbLocalAvailability();
let db: DynamoDBLocal | undefined;
let proxy: Server | undefined;
let endpoint = "";
/** The operations whose next request the proxy answers with a conflict, in order. */
const conflicts: string[] = [];
/** Every operation the proxy saw. */
const seen: string[] = [];

const ERRORS: Record<string, object> = {
  UpdateItem: {
    __type: "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
    message: "Transaction is ongoing for the item",
  },
  TransactWriteItems: {
    __type: "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
    message:
      "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]",
    CancellationReasons: [
      { Code: "TransactionConflict", Message: "Transaction is ongoing for the item" },
      { Code: "None" },
    ],
  },
};

beforeAll(async () => {
  if (!availability.available) return;
  db = await startDynamoDBLocal();
  const to = new URL(db.endpoint);
  proxy = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const operation = String(incoming.headers["x-amz-target"]).split(".").pop() ?? "";
      seen.push(operation);
      if (conflicts[0] === operation) {
        conflicts.shift();
        outgoing.writeHead(400, { "content-type": "application/x-amz-json-1.0" });
        outgoing.end(JSON.stringify(ERRORS[operation]));
        return;
      }
      const forwarded = request(
        { host: to.hostname, port: to.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
        (answer) => {
          outgoing.writeHead(answer.statusCode ?? 500, answer.headers);
          answer.pipe(outgoing);
        },
      );
      forwarded.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => proxy?.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
}, 90_000);
afterAll(async () => {
  await new Promise((resolve) => (proxy ? proxy.close(resolve) : resolve(undefined)));
  await stopDynamoDBLocal(db);
});

const proxied = () => {
  const client = new DynamoDBClient({ ...LOCAL, endpoint });
  (db as DynamoDBLocal).clients.push(client);
  return client;
};

describe.skipIf(!availability.available)("DynamoDBOrderStore meeting a transaction under way", () => {
  it("a hold refused with TransactionConflictException waits and looks again, as for a flag held", async () => {
    // Bounds long enough for a loaded machine: what is under test is what each answer is, not how fast.
    const store = new DynamoDBOrderStore(proxied(), {
      table: (db as DynamoDBLocal).table,
      scope: "conflicts",
      timeout: "30s",
    });
    conflicts.push("UpdateItem");
    seen.splice(0);
    const hold = await store.hold("alpha", 60_000);
    expect(seen).toEqual(["UpdateItem", "UpdateItem"]);
    await hold.commit({ fields: { a: "x" } });
  });

  it("a delivery's transaction cancelled by a conflict is sent again: 204, the id done", async () => {
    const { table } = db as DynamoDBLocal;
    const scope = `conflicts-${randomUUID().slice(0, 8)}`;
    const client = proxied();
    let runs = 0;
    const handle = webhookHandler({
      secret: SECRET,
      dedupe: { store: new DynamoDBDedupeStore(client, { table, scope, timeout: "30s" }), ttl: "1h", timeout: "30s" },
      order: { store: new DynamoDBOrderStore(client, { table, scope, timeout: "30s" }), timeout: "60s" },
      onEvent: () => {
        runs++;
      },
    });
    const event = createEvent("flag.updated", {
      data: { flag: "dark-mode", changes: [{ path: "on", from: false, to: true }] },
    });
    conflicts.push("TransactWriteItems");
    seen.splice(0);
    expect((await handle(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    expect(seen).toEqual(["PutItem", "UpdateItem", "TransactWriteItems", "TransactWriteItems"]);
    expect(await (db as DynamoDBLocal).item(`${scope}#${event.id}`)).toMatchObject({ state: { S: "done" } });
    expect(runs).toBe(1);
  });
});
