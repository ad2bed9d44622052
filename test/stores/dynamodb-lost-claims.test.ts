import { randomUUID } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { DynamoDBDedupeStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "../support/dynalite.js";

// A claim the SDK gave up on, though DynamoDB wrote it: its answer lost and no attempt left (or
// the store's timeout aborted it). The delivery is answered 503 and the sender retries; the claim
// that landed is this delivery's own, and must not hold the id against that retry for the whole
// lease (409 until inFlightTtl, 60 s by default). A proxy in front of dynalite lets it apply the
// chosen PutItem, then cuts the connection instead of answering.

let db: Dynalite;
let proxy: Server;
let endpoint: string;
/** Loses the answer to the next PutItem whose body contains this text. */
let lose: string | undefined;

beforeAll(async () => {
  db = await startDynalite();
  const target = new URL(db.endpoint);
  proxy = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const body = Buffer.concat(chunks);
      const losing =
        lose !== undefined &&
        String(incoming.headers["x-amz-target"]).endsWith(".PutItem") &&
        body.toString("utf8").includes(lose);
      if (losing) lose = undefined;
      const forwarded = request(
        {
          host: target.hostname,
          port: target.port,
          method: incoming.method,
          path: incoming.url,
          headers: incoming.headers,
        },
        (answer) => {
          const answered: Buffer[] = [];
          answer.on("data", (chunk: Buffer) => answered.push(chunk));
          answer.on("end", () => {
            if (losing) {
              incoming.socket.destroy();
              return;
            }
            outgoing.writeHead(answer.statusCode ?? 500, answer.headers);
            outgoing.end(Buffer.concat(answered));
          });
        },
      );
      forwarded.end(body);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => proxy?.close(resolve));
  await stopDynalite(db);
});

describe("DynamoDBDedupeStore: a claim the SDK gave up on, though it landed", () => {
  it("is freed, that claim only, so the sender's retry claims the id at once", async () => {
    const scope = `lost-${randomUUID().slice(0, 8)}`;
    const id = `evt_${randomUUID()}`;
    // One attempt: the SDK reports the lost answer instead of sending the write again.
    const store = new DynamoDBDedupeStore(db.client({ endpoint, maxAttempts: 1 }), { table: db.table, scope });
    lose = `${scope}#${id}`;
    await expect(store.claim(id, 60_000)).rejects.toThrow();
    expect(lose).toBeUndefined();
    const direct = new DynamoDBDedupeStore(db.client(), { table: db.table, scope });
    await expect.poll(() => direct.claim(id, 60_000), { timeout: 3000 }).toBe("claimed");
  });

  it("never frees another delivery's claim of the id", async () => {
    const scope = `lost-${randomUUID().slice(0, 8)}`;
    const id = `evt_${randomUUID()}`;
    const direct = new DynamoDBDedupeStore(db.client(), { table: db.table, scope });
    expect(await direct.claim(id, 60_000)).toBe("claimed");
    const store = new DynamoDBDedupeStore(db.client({ endpoint, maxAttempts: 1 }), { table: db.table, scope });
    lose = `${scope}#${id}`;
    await expect(store.claim(id, 60_000)).rejects.toThrow();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await db.item(`${scope}#${id}`))?.state).toEqual({ S: "claimed" });
    expect(await store.claim(id, 60_000)).toBe("in_flight");
  });

  it("through a receiver: 503, then the retry runs the handler at once instead of 409 for the lease", async () => {
    const scope = `lost-${randomUUID().slice(0, 8)}`;
    const secret = "whsec-dynamodb-lost-claims";
    const handled: string[] = [];
    const receive = webhookHandler({
      secret,
      dedupe: {
        store: new DynamoDBDedupeStore(db.client({ endpoint, maxAttempts: 1 }), { table: db.table, scope }),
        ttl: "1h",
        inFlightTtl: "60s",
      },
      onError: () => {},
      onEvent: (event) => {
        handled.push(event.id);
      },
    });
    const event = createEvent("flag.updated");
    lose = `${scope}#${event.id}`;
    expect((await receive(await signedRequest({ secret, event }))).status).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await receive(await signedRequest({ secret, event }))).status).toBe(204);
    expect(handled).toEqual([event.id]);
  });
});
