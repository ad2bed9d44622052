import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { WebhookEvent } from "flag-webhooks";
import { DynamoDBDedupeStore, dedupeTable } from "flag-webhooks/dynamodb";
import {
  type LambdaContext,
  type LambdaProxyEventV2,
  type LambdaProxyResult,
  webhookHandler,
} from "flag-webhooks/lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildCases, type DeliveryCase, LIMIT, SECRET, SECRETS } from "../support/cases.js";
import { signatureOf } from "../support/deliveries.js";
import { countedClient, type Dynalite, startDynalite, stopDynalite } from "../support/dynalite.js";
import { describeStoreContract, expectScopeChecked } from "../support/store-contract.js";

// DynamoDBDedupeStore against dynalite (the DynamoDB API, served from this process on a free
// loopback port): the store contract, the requests it costs, and Lambda receivers racing, timing
// out and losing the endpoint through the public Lambda adapter.

let db: Dynalite;
beforeAll(async () => {
  db = await startDynalite();
});
afterAll(() => stopDynalite(db));

const newScope = () => `test-${randomUUID().slice(0, 8)}`;
// What each request answers is under test, not how fast: 20 claims at once on dynalite took 0.2–0.3 s
// on a quiet machine, and 5–6 times longer under load, near the store's default 2 s bound (a 503).
const store = (scope: string, client: DynamoDBClient = db.client()) =>
  new DynamoDBDedupeStore(client, { table: db.table, scope, timeout: "30s" });

/** A client that records the name of every command it sends. */
function countingClient(): { client: DynamoDBClient; sent: string[] } {
  const { client, names } = countedClient(db);
  return { client, sent: names };
}

describeStoreContract(
  "DynamoDBDedupeStore on dynalite",
  {
    shared: true,
    scoped: true,
    async make() {
      const scope = newScope();
      return { store: store(scope), peer: store(scope), otherScope: store(newScope()) };
    },
  },
  () => {
    it("writes pk scope#id, the state, and expiresAt in epoch seconds for DynamoDB's TTL", async () => {
      const scope = newScope();
      const id = `evt_${randomUUID()}`;
      const own = store(scope);
      const before = Date.now();
      expect(await own.claim(id, 60_000)).toBe("claimed");
      const claimed = await db.item(`${scope}#${id}`);
      expect(claimed).toMatchObject({
        pk: { S: `${scope}#${id}` },
        state: { S: "claimed" },
        token: { S: expect.any(String) },
      });
      await own.complete(id, 86_400_000);
      const done = (await db.item(`${scope}#${id}`)) as Record<string, { N?: string; S?: string }>;
      expect(done.state?.S).toBe("done");
      expect(done.token).toBeUndefined();
      const seconds = Number(done[dedupeTable.TimeToLiveSpecification.AttributeName]?.N);
      expect(Number.isInteger(seconds)).toBe(true);
      expect(seconds).toBeGreaterThanOrEqual(Math.floor((before + 86_400_000) / 1000));
      expect(seconds).toBeLessThanOrEqual(Math.ceil((Date.now() + 86_400_000) / 1000));
    });

    it("treats an item past its expiry as absent though TTL has not deleted it", async () => {
      const scope = newScope();
      const id = `evt_${randomUUID()}`;
      const own = store(scope);
      expect(await own.claim(id, 10_000)).toBe("claimed");
      await own.complete(id, 100);
      await sleep(150);
      // dynalite, like DynamoDB within TTL's lag, still holds the item.
      expect((await db.item(`${scope}#${id}`))?.state).toEqual({ S: "done" });
      expect(await store(scope).claim(id, 10_000)).toBe("claimed");
    });

    it("costs one request to claim, one to complete; a duplicate one PutItem (plus one read where the failure returns no item, as on dynalite)", async () => {
      const scope = newScope();
      const id = `evt_${randomUUID()}`;
      const { client, sent } = countingClient();
      const own = store(scope, client);
      expect(await own.claim(id, 10_000)).toBe("claimed");
      await own.complete(id, 60_000);
      expect(sent.splice(0)).toEqual(["PutItem", "PutItem"]);
      expect(await own.claim(id, 10_000)).toBe("done");
      // DynamoDB returns the failing item (ReturnValuesOnConditionCheckFailure: ALL_OLD); dynalite
      // does not, so the store reads it: the GetItem below is dynalite's, not DynamoDB's.
      expect(sent.splice(0)).toEqual(["PutItem", "GetItem"]);
      const other = `evt_${randomUUID()}`;
      expect(await own.claim(other, 10_000)).toBe("claimed");
      await own.release(other);
      expect(sent.splice(0)).toEqual(["PutItem", "DeleteItem"]);
    });

    it("dedupes an id too long for DynamoDB's 2048-byte key under its SHA-256", async () => {
      const scope = newScope();
      const id = `evt_${"é".repeat(3000)}`;
      const [a, b] = [store(scope), store(scope)];
      expect(await a.claim(id, 10_000)).toBe("claimed");
      expect(await b.claim(id, 10_000)).toBe("in_flight");
      expect(await b.claim(`${id}x`, 10_000)).toBe("claimed");
      const [held] = await db.items(`${scope}##`);
      expect((held?.pk as { S: string } | undefined)?.S).toMatch(new RegExp(`^${scope}##[0-9a-f]{64}$`));
    });
  },
);

describe("DynamoDBDedupeStore options", () => {
  it("requires a scope of 1-100 characters of A-Za-z0-9._- and names the option", () => {
    const client = db.client();
    expectScopeChecked(
      "DynamoDBDedupeStore",
      (scope) => new DynamoDBDedupeStore(client, { table: db.table, scope } as never),
    );
  });

  it("requires a client and a table name, and a valid timeout", () => {
    expect(() => new DynamoDBDedupeStore({} as never, { table: db.table, scope: "a" })).toThrow(
      /needs a DynamoDBClient/,
    );
    expect(() => new DynamoDBDedupeStore(undefined as never, { table: db.table, scope: "a" })).toThrow(
      /needs a DynamoDBClient/,
    );
    expect(() => new DynamoDBDedupeStore(db.client(), { scope: "a" } as never)).toThrow(/option "table"/);
    // DynamoDB table names are 3 to 255 characters.
    expect(() => new DynamoDBDedupeStore(db.client(), { table: "ab", scope: "a" })).toThrow(/option "table"/);
    expect(() => new DynamoDBDedupeStore(db.client(), { table: "abc", scope: "a" })).not.toThrow();
    expect(() => new DynamoDBDedupeStore(db.client(), { table: db.table, scope: "a", timeout: "soon" })).toThrow(
      /option "timeout"/,
    );
    // Each request's abort signal waits on a timer, which waits at most 2³¹−1 ms: a longer one
    // would fire after 1 ms and abort every request.
    expect(() => new DynamoDBDedupeStore(db.client(), { table: db.table, scope: "a", timeout: 2 ** 31 })).toThrow(
      /option "timeout" must be at most 2147483647 ms/,
    );
    expect(
      () => new DynamoDBDedupeStore(db.client(), { table: db.table, scope: "a", timeout: 2 ** 31 - 1 }),
    ).not.toThrow();
  });
});

// A claim refused while the record is there, and the record changing before the store reads it:
// each race is made on dynalite by running the other instance's step just before the read (or
// the write), with the SDK's middleware on the racing store's own client.
describe("DynamoDBDedupeStore under races and refusals", () => {
  /** A client that runs `before(commandName)` before each command it sends. */
  function racingClient(before: (command: string) => Promise<unknown>): DynamoDBClient {
    const client = db.client();
    client.middlewareStack.add(
      (next, context) => async (args) => {
        await before(String(context.commandName));
        return next(args);
      },
      { step: "initialize" },
    );
    return client;
  }

  it("claims an id released between its refused claim and the read", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    const holder = store(scope);
    expect(await holder.claim(id, 10_000)).toBe("claimed");
    const sent: string[] = [];
    const racer = store(
      scope,
      racingClient(async (command) => {
        sent.push(command);
        if (command === "GetItemCommand") await holder.release(id);
      }),
    );
    expect(await racer.claim(id, 10_000)).toBe("claimed");
    expect(sent).toEqual(["PutItemCommand", "GetItemCommand", "PutItemCommand"]);
  });

  it("answers in_flight when the id is taken again at each of its two tries", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    const holder = store(scope);
    let puts = 0;
    const racer = store(
      scope,
      racingClient(async (command) => {
        if (command === "PutItemCommand" && ++puts === 1) expect(await holder.claim(id, 10_000)).toBe("claimed");
        if (command === "PutItemCommand" && puts === 2) expect(await holder.claim(id, 10_000)).toBe("claimed");
        if (command === "GetItemCommand") await holder.release(id);
      }),
    );
    expect(await racer.claim(id, 10_000)).toBe("in_flight");
    expect(puts).toBe(2);
  });

  it("never releases another instance's claim, though both share the scope", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    const [a, b] = [store(scope), store(scope)];
    expect(await a.claim(id, 10_000)).toBe("claimed");
    await b.release(id);
    expect(await b.claim(id, 10_000)).toBe("in_flight");
    expect((await db.item(`${scope}#${id}`))?.state).toEqual({ S: "claimed" });
  });

  it("throws what DynamoDB refuses, other than its own condition", async () => {
    const scope = newScope();
    const id = `evt_${randomUUID()}`;
    // A lease that is no number: DynamoDB refuses the item ("NaN" is no number).
    await expect(store(scope).claim(id, Number.NaN)).rejects.toThrow();
    expect(await db.items(`${scope}#`)).toEqual([]);
    // A table that does not exist: every call fails, release too.
    const missing = new DynamoDBDedupeStore(db.client(), { table: "no-such-table", scope });
    await expect(missing.claim(id, 10_000)).rejects.toMatchObject({ name: "ResourceNotFoundException" });
    await expect(missing.release(id)).rejects.toMatchObject({ name: "ResourceNotFoundException" });
    await expect(missing.complete(id, 10_000)).rejects.toMatchObject({ name: "ResourceNotFoundException" });
  });

  it("gives up on an endpoint that never answers, by its own timeout", async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const endpoint = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
      const lost = new DynamoDBDedupeStore(db.client({ endpoint, maxAttempts: 1 }), {
        table: db.table,
        scope: "lost",
        timeout: 200,
      });
      // Only the store's timeout ends these: without it each would wait forever.
      await expect(lost.claim("evt_lost", 10_000)).rejects.toThrow();
      await expect(lost.complete("evt_lost", 10_000)).rejects.toThrow();
      await expect(lost.release("evt_lost")).rejects.toThrow();
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});

// Lambda receivers, as API Gateway or a function URL invokes them.
const context: LambdaContext = { awsRequestId: "req-1", getRemainingTimeInMillis: () => 3000 };
const sign = (body: string | Buffer) => signatureOf(SECRET, body);
const fixture = JSON.parse(
  readFileSync(join(import.meta.dirname, "../fixtures/lambda/http-api-v2.json"), "utf8"),
) as LambdaProxyEventV2;

/** An HTTP API 2.0 event carrying the body as base64 (its exact bytes) and the given headers. */
function lambdaEvent(body: Buffer | string, headers: Record<string, string | string[]>, method = "POST") {
  const lower: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) lower[name.toLowerCase()] = [value].flat().join(",");
  return {
    ...fixture,
    headers: lower,
    requestContext: { ...fixture.requestContext, http: { ...fixture.requestContext.http, method } },
    body: Buffer.from(body).toString("base64"),
    isBase64Encoded: true,
  } satisfies LambdaProxyEventV2;
}
const delivery = async (body: string) => lambdaEvent(body, { "service-signature": await sign(body) });
const eventBody = (id: string) =>
  JSON.stringify({ id, type: "flag.created", createdAt: new Date().toISOString(), environment: "prod", data: {} });
const errorCode = (result: LambdaProxyResult) => JSON.parse(result.body || "{}").error?.code;

describe("Lambda receivers on one table", () => {
  it("the same delivery at the same moment to two function instances runs the handler once; the other copy is told to retry", async () => {
    const scope = newScope();
    const started: string[] = [];
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // Two instances, as two Lambda execution environments: each its own client and store.
    const [a, b] = [store(scope), store(scope)].map((own) =>
      webhookHandler({
        secret: SECRET,
        dedupe: { store: own, ttl: "1h" },
        async onEvent(event: WebhookEvent) {
          started.push(event.id);
          await gate;
        },
      }),
    ) as [ReturnType<typeof webhookHandler>, ReturnType<typeof webhookHandler>];
    const id = `evt_${randomUUID()}`;
    const body = eventBody(id);
    const [toA, toB] = [await await delivery(body), await await delivery(body)];
    const copies = [a(toA, context), b(toB, context)];
    await Promise.race(copies);
    open();
    const results = await Promise.all(copies);
    expect(results.map((r) => r.statusCode).sort()).toEqual([204, 409]);
    const busy = results.find((r) => r.statusCode === 409) as LambdaProxyResult;
    expect([errorCode(busy), busy.headers?.["retry-after"]]).toEqual(["delivery_in_progress", "5"]);
    expect(started).toEqual([id]);
    for (const instance of [a, b]) {
      const retry = await instance(await delivery(body), context);
      expect([retry.statusCode, retry.headers?.["webhook-duplicate"]]).toEqual([204, "true"]);
    }
    expect(started).toEqual([id]);
  });

  it("a claim whose lease lapsed (a frozen or timed-out instance) lets another instance run the delivery; the late failure frees nothing", async () => {
    const scope = newScope();
    const started: string[] = [];
    let fail: () => void = () => undefined;
    const stuck = new Promise<void>((_, reject) => {
      fail = () => reject(new Error("timed out"));
    });
    const frozen = webhookHandler({
      secret: SECRET,
      dedupe: { store: store(scope), ttl: "1h", inFlightTtl: 300 },
      onError: () => undefined,
      async onEvent(event: WebhookEvent) {
        started.push(`frozen:${event.id}`);
        await stuck;
      },
    });
    const healthy = webhookHandler({
      secret: SECRET,
      dedupe: { store: store(scope), ttl: "1h" },
      onEvent: (event: WebhookEvent) => void started.push(`healthy:${event.id}`),
    });
    const id = `evt_${randomUUID()}`;
    const body = eventBody(id);
    const first = frozen(await delivery(body), context);
    await expect.poll(() => started).toEqual([`frozen:${id}`]);
    expect((await healthy(await delivery(body), context)).statusCode).toBe(409);
    await sleep(350);
    expect((await healthy(await delivery(body), context)).statusCode).toBe(204);
    fail();
    expect((await first).statusCode).toBe(500);
    expect(started).toEqual([`frozen:${id}`, `healthy:${id}`]);
    const again = await frozen(await delivery(body), context);
    expect([again.statusCode, again.headers?.["webhook-duplicate"]]).toEqual([204, "true"]);
    expect((await db.item(`${scope}#${id}`))?.state).toEqual({ S: "done" });
  });

  describe("when DynamoDB cannot be reached", () => {
    let silent: Server;
    const sockets: Socket[] = [];
    beforeAll(async () => {
      // Accepts connections and never answers: only the store's own timeout ends a request.
      silent = createServer((socket) => void sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    });
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });

    const endpoints = {
      // Nothing listens on port 1: connections are refused (and retried by the SDK).
      "a refused connection": () => ({ endpoint: "http://127.0.0.1:1", timeout: 2000 }),
      // Only the store's timeout (its abortSignal) ends these requests, well before the receiver's.
      "an endpoint that never answers": () => ({
        endpoint: `http://127.0.0.1:${(silent.address() as { port: number }).port}`,
        timeout: 300,
      }),
    };

    it.each(Object.keys(endpoints) as (keyof typeof endpoints)[])(
      "%s: answers 503 store_unavailable with Retry-After, and runs no handler",
      async (name) => {
        const { endpoint, timeout } = endpoints[name]();
        const errors: unknown[] = [];
        let calls = 0;
        const client = db.client({ endpoint });
        const lambda = webhookHandler({
          secret: SECRET,
          dedupe: { store: new DynamoDBDedupeStore(client, { table: db.table, scope: "down", timeout }), ttl: "1h" },
          onError: (error) => void errors.push(error),
          onEvent: () => void calls++,
        });
        const started = Date.now();
        const result = await lambda(await delivery(eventBody(`evt_${randomUUID()}`)), context);
        expect([result.statusCode, errorCode(result), result.headers?.["retry-after"]]).toEqual([
          503,
          "store_unavailable",
          "10",
        ]);
        expect(Date.now() - started).toBeLessThan(5000);
        expect(calls).toBe(0);
        expect(errors.length).toBeGreaterThan(0);
        // A forgery is still refused first, without the store.
        const forged = await lambda(lambdaEvent(eventBody("evt_x"), { "service-signature": "0".repeat(64) }), context);
        expect(forged.statusCode).toBe(401);
      },
    );
  });
});

// The Lambda adapter's case table (test/support/cases.ts) with this store: each case its own scope, so
// each is a first delivery and gets the answer it gets without dedupe; then the same delivery
// again is a duplicate where the first was handled, and the same refusal where it was refused.
const cases = await buildCases();
describe("the Lambda case table with DynamoDBDedupeStore", () => {
  it.each(cases)("$name", async (c: DeliveryCase) => {
    const scope = newScope();
    let calls = 0;
    const lambda = webhookHandler({
      secret: SECRETS,
      limit: LIMIT,
      dedupe: { store: store(scope), ttl: "1h" },
      onEvent(event: WebhookEvent) {
        calls++;
        return { status: 200, body: { received: event } };
      },
    });
    const event = () => lambdaEvent(c.method === "GET" ? "" : c.body, c.headers, c.method ?? "POST");
    const first = await lambda(event(), context);
    expect(first.statusCode).toBe(c.status);
    const second = await lambda(event(), context);
    const items = await db.items(`${scope}#`);
    if (c.code) {
      expect(errorCode(first)).toBe(c.code);
      expect([second.statusCode, errorCode(second)]).toEqual([c.status, c.code]);
      expect(calls).toBe(0);
      expect(items).toEqual([]);
    } else {
      expect(JSON.parse(first.body).received.type).toBe(c.eventType);
      expect([second.statusCode, second.headers?.["webhook-duplicate"]]).toEqual([204, "true"]);
      expect(calls).toBe(1);
      expect(items.map((item) => item.state)).toEqual([{ S: "done" }]);
    }
  });
});

describe("examples/lambda-dynamodb", () => {
  const names = [
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "DEDUPE_TABLE",
    "WEBHOOK_SECRET",
  ];
  const saved = Object.fromEntries(names.map((name) => [name, process.env[name]]));
  afterAll(() => {
    for (const name of names) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  it("handler.ts, configured only by the environment as SAM sets it, handles a delivery once and refuses a forgery", async () => {
    // The SDK reads the endpoint from AWS_ENDPOINT_URL_DYNAMODB: the example's code is unchanged.
    Object.assign(process.env, {
      AWS_ENDPOINT_URL_DYNAMODB: db.endpoint,
      AWS_REGION: "local",
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
      DEDUPE_TABLE: db.table,
      WEBHOOK_SECRET: SECRET,
    });
    const { handler } = await import("../../examples/lambda-dynamodb/handler.js");
    const logged: string[] = [];
    const log = vi.spyOn(console, "log").mockImplementation((line: string) => void logged.push(line));
    try {
      const id = `evt_${randomUUID()}`;
      const body = eventBody(id);
      expect((await handler(await delivery(body), context)).statusCode).toBe(204);
      const again = await handler(await delivery(body), context);
      expect([again.statusCode, again.headers?.["webhook-duplicate"]]).toEqual([204, "true"]);
      const forged = await handler(lambdaEvent(body, { "service-signature": await sign(`${body} `) }), context);
      expect([forged.statusCode, errorCode(forged)]).toEqual([401, "invalid_signature"]);
      expect(logged).toEqual([JSON.stringify({ audit: id, type: "flag.created" })]);
      expect((await db.item(`flag-audit#${id}`))?.state).toEqual({ S: "done" });
    } finally {
      log.mockRestore();
    }
  });

  it("template.yaml declares the table dedupeTable describes", () => {
    const template = readFileSync(join(import.meta.dirname, "../../examples/lambda-dynamodb/template.yaml"), "utf8");
    const [attribute] = dedupeTable.AttributeDefinitions;
    const [key] = dedupeTable.KeySchema;
    expect(template).toContain(
      `- AttributeName: ${attribute.AttributeName}\n          AttributeType: ${attribute.AttributeType}`,
    );
    expect(template).toContain(`- AttributeName: ${key.AttributeName}\n          KeyType: ${key.KeyType}`);
    expect(template).toContain(`BillingMode: ${dedupeTable.BillingMode}`);
    expect(template).toContain(
      `TimeToLiveSpecification:\n        AttributeName: ${dedupeTable.TimeToLiveSpecification.AttributeName}\n        Enabled: true`,
    );
  });
});
