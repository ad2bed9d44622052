import { randomUUID } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { DynamoDBDedupeStore } from "flag-webhooks/dynamodb";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Dynalite, startDynalite, stopDynalite } from "../support/dynalite.js";

// DynamoDBDedupeStore when an answer is lost on the way back: a proxy in front of dynalite passes
// each request on, and for the requests a test picks, lets dynalite apply it, then cuts the
// connection instead of answering. The SDK sees the socket hang up and sends the same request
// again, as it does when a real answer is lost; the store must know its own claim when it meets it.

/** A proxy to dynalite that loses the answers to chosen requests after dynalite has applied them. */
interface LossyProxy {
  endpoint: string;
  /** Requests seen, as `<operation> <body>`. */
  seen: string[];
  /** Loses the answer to the next request of `operation` whose body contains `text`. */
  loseNext(operation: string, text: string): void;
  /** Answers lost so far. */
  lost: number;
  close(): Promise<void>;
}

async function lossyProxy(target: string): Promise<LossyProxy> {
  const to = new URL(target);
  const losses: { operation: string; text: string }[] = [];
  const proxy: LossyProxy = {
    endpoint: "",
    seen: [],
    lost: 0,
    loseNext: (operation, text) => losses.push({ operation, text }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const body = Buffer.concat(chunks);
      const operation = String(incoming.headers["x-amz-target"]).split(".").pop() ?? "";
      proxy.seen.push(`${operation} ${body.toString("utf8")}`);
      const loss = losses.findIndex((l) => l.operation === operation && body.toString("utf8").includes(l.text));
      const forwarded = request(
        { host: to.hostname, port: to.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
        (answer) => {
          const answered: Buffer[] = [];
          answer.on("data", (chunk: Buffer) => answered.push(chunk));
          answer.on("end", () => {
            if (loss >= 0) {
              // Applied by dynalite, answered, and the answer lost: the connection just ends.
              losses.splice(loss, 1);
              proxy.lost++;
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
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}

let db: Dynalite;
let proxy: LossyProxy;
beforeAll(async () => {
  db = await startDynalite();
  proxy = await lossyProxy(db.endpoint);
});
afterAll(async () => {
  await stopDynalite(db);
  await proxy?.close();
});

const newScope = () => `retries-${randomUUID().slice(0, 8)}`;
/** A store whose requests go through the lossy proxy; the SDK's own retries on (3 attempts). */
const lossyStore = (scope: string) =>
  new DynamoDBDedupeStore(db.client({ endpoint: proxy.endpoint, maxAttempts: 3 }), { table: db.table, scope });
const directStore = (scope: string) => new DynamoDBDedupeStore(db.client(), { table: db.table, scope });
const putItems = (pk: string) => proxy.seen.filter((line) => line.startsWith("PutItem ") && line.includes(pk)).length;

describe("DynamoDBDedupeStore: the answer to a request lost, the SDK sends it again", () => {
  it("a claim whose answer was lost is claimed, not read back as another's claim in flight", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    const store = lossyStore(scope);
    const lostBefore = proxy.lost;
    proxy.loseNext("PutItem", `${scope}#${id}`);
    expect(await store.claim(id, 60_000)).toBe("claimed");
    // The claim was written, its answer lost, and the same write sent again.
    expect(proxy.lost).toBe(lostBefore + 1);
    expect(putItems(`${scope}#${id}`)).toBe(2);
    expect((await db.item(`${scope}#${id}`))?.state).toEqual({ S: "claimed" });
    // Still one claim: another call, from this store or another instance, finds it in flight.
    expect(await store.claim(id, 60_000)).toBe("in_flight");
    expect(await directStore(scope).claim(id, 60_000)).toBe("in_flight");
    // And it is this store's claim: its release frees it.
    await store.release(id);
    expect(await directStore(scope).claim(id, 60_000)).toBe("claimed");
  });

  it("another instance's claim stays in flight when the answer to this claim's failed condition is lost", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    expect(await directStore(scope).claim(id, 60_000)).toBe("claimed");
    proxy.loseNext("PutItem", `${scope}#${id}`);
    expect(await lossyStore(scope).claim(id, 60_000)).toBe("in_flight");
    // The write whose answer was lost and the same write again (the first claim went direct).
    expect(putItems(`${scope}#${id}`)).toBe(2);
  });

  it("a done id stays done when the answer to a claim of it is lost", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    const first = directStore(scope);
    expect(await first.claim(id, 60_000)).toBe("claimed");
    await first.complete(id, 60_000);
    proxy.loseNext("PutItem", `${scope}#${id}`);
    expect(await lossyStore(scope).claim(id, 60_000)).toBe("done");
  });

  it("a completion or a release whose answer was lost is done all the same", async () => {
    const scope = newScope();
    const [done, released] = [`evt_${randomUUID()}`, `evt_${randomUUID()}`];
    const store = lossyStore(scope);
    expect(await store.claim(done, 60_000)).toBe("claimed");
    proxy.loseNext("PutItem", `${scope}#${done}`);
    await store.complete(done, 60_000);
    expect(await directStore(scope).claim(done, 60_000)).toBe("done");
    expect(await store.claim(released, 60_000)).toBe("claimed");
    proxy.loseNext("DeleteItem", `${scope}#${released}`);
    await store.release(released);
    expect(await directStore(scope).claim(released, 60_000)).toBe("claimed");
  });

  it("through a receiver: the delivery whose claim's answer was lost runs its handler at once, and a copy is a duplicate", async () => {
    const scope = newScope();
    const secret = "whsec-dynamodb-retries";
    const handled: string[] = [];
    const receive = webhookHandler({
      secret,
      dedupe: { store: lossyStore(scope), ttl: "1h", inFlightTtl: "60s" },
      onEvent: (event) => {
        handled.push(event.id);
      },
    });
    const event = createEvent("flag.updated");
    proxy.loseNext("PutItem", `${scope}#${event.id}`);
    const first = await receive(await signedRequest({ secret, event }));
    expect(first.status).toBe(204);
    expect(handled).toEqual([event.id]);
    const copy = await receive(await signedRequest({ secret, event }));
    expect(copy.status).toBe(204);
    expect(copy.headers.get("webhook-duplicate")).toBe("true");
    expect(handled).toEqual([event.id]);
  });
});
