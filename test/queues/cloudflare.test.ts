import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { parseEvent, WebhookError } from "flag-webhooks";
import { consumeEvents, type EventMessage, enqueueTo } from "flag-webhooks/cloudflare";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { reportWorkerdCoverage, startWorker } from "../support/cloudflare-bundle.js";
import { signatureOf } from "../support/deliveries.js";

// The Cloudflare Queues hand-off in workerd, through miniflare: a real Worker (test/fixtures/
// cloudflare/worker.ts, bundled with esbuild) that receives deliveries, dedupes them on Durable
// Objects and enqueues them, with real Durable Object, Queue and KV bindings, and its consumer.
// Under Stryker (stryker.workerd.config.mjs) the mutant switched on here is switched on in workerd
// too, and what workerd covered is handed back: that is how the consumer, which runs only there,
// is measured. The Durable Object store itself: test/stores/durable-object.test.ts.

const SECRET = "whsec-cloudflare-test";
const sign = (body: string) => signatureOf(SECRET, body);

let mf: Miniflare;
// Why the Worker did not start, if it did not: the first test fails with it. A failed beforeAll
// alone leaves the tests without a result, which Stryker's vitest runner reads as passing (so a
// mutant that breaks the Worker's loading would survive).
let startFailure: unknown;
beforeAll(async () => {
  try {
    await start();
  } catch (error) {
    startFailure = error;
  }
}, 60_000);

async function start(): Promise<void> {
  mf = await startWorker(
    "test/fixtures/cloudflare/worker.ts",
    {
      bindings: { WEBHOOK_SECRET: SECRET },
      durableObjects: { DEDUPE: "TestDedupeObject" },
      queueProducers: { FLAG_EVENTS: "flag-events" },
      queueConsumers: { "flag-events": { maxBatchSize: 10, maxBatchTimeout: 0.05, maxRetries: 3, retryDelay: 0 } },
      kvNamespaces: ["SEEN"],
    },
    { stryker: true },
  );
}

it("the Worker loads in workerd", () => {
  expect(startFailure).toBeUndefined();
});
afterAll(async () => {
  if (startFailure === undefined) {
    await reportWorkerdCoverage(async () => (await mf.dispatchFetch("http://worker/__stryker_coverage")).json());
  }
  await mf?.dispose();
});

const eventBody = (id: string, flag = "new-checkout", pad = 0) =>
  JSON.stringify({
    id,
    type: "flag.updated",
    createdAt: new Date().toISOString(),
    environment: "prod",
    data: {
      flag,
      changes: [{ path: "on", from: false, to: true }],
      actor: { type: "user", email: "dana@example.com" },
      ...(pad ? { note: "x".repeat(pad) } : {}),
    },
  });

async function deliver(body: string, signature?: string) {
  return mf.dispatchFetch("http://worker/webhooks", {
    method: "POST",
    headers: { "content-type": "application/json", "service-signature": signature ?? (await sign(body)) },
    body,
  });
}

/** What the consumer recorded for an event: one entry per attempt that succeeded. */
async function seen(id: string): Promise<{ key: string; value: unknown }[]> {
  const kv = await mf.getKVNamespace("SEEN");
  const { keys } = await kv.list({ prefix: `seen:${id}:` });
  return Promise.all(keys.map(async ({ name }) => ({ key: name, value: JSON.parse((await kv.get(name)) ?? "null") })));
}

interface Reported {
  id: string;
  attempts: number;
  code: string;
  message: string;
  cause: string | null;
}

async function reported(): Promise<Reported[]> {
  return (await mf.dispatchFetch("http://worker/reported")).json() as Promise<Reported[]>;
}

describe("a Worker receiving into a Queue, deduped by Durable Objects", () => {
  it("answers 202 once the queue has the event, and the consumer gets it typed, once", async () => {
    const id = `evt_${randomUUID()}`;
    const body = eventBody(id);
    const first = await deliver(body);
    expect(first.status).toBe(202);
    await expect
      .poll(() => seen(id), { timeout: 10_000 })
      .toEqual([{ key: `seen:${id}:1`, value: { type: "flag.updated", flag: "new-checkout", changes: 1 } }]);
    const again = await deliver(body);
    expect([again.status, again.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    const forged = await deliver(body, await sign(`${body} `));
    expect(forged.status).toBe(401);
  });

  it("the same delivery at the same moment, many times, is enqueued and consumed once", async () => {
    const id = `evt_${randomUUID()}`;
    const body = eventBody(id);
    const signature = await sign(body);
    const answers = await Promise.all(Array.from({ length: 6 }, () => deliver(body, signature)));
    const statuses = answers.map((r) => r.status);
    // One copy claimed and enqueued; each other copy met its claim (409) or its completion (204).
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.every((s) => s === 202 || s === 409 || s === 204)).toBe(true);
    await expect.poll(() => seen(id), { timeout: 10_000 }).toHaveLength(1);
    // The senders' retries of the 409s are duplicates now.
    const retry = await deliver(body);
    expect([retry.status, retry.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    await sleep(300);
    expect(await seen(id)).toHaveLength(1);
  });

  it("retries a message whose handler threw, and acks it once the handler succeeds", async () => {
    const id = `evt_${randomUUID()}`;
    expect((await deliver(eventBody(id, "fail-once"))).status).toBe(202);
    await expect
      .poll(() => seen(id), { timeout: 10_000 })
      .toEqual([{ key: `seen:${id}:2`, value: { type: "flag.updated", flag: "fail-once", changes: 1 } }]);
    const report = (await reported()).filter((r) => r.code === "downstream unavailable");
    expect(report.map((r) => r.attempts)).toContain(1);
  });

  it("acks and reports a message that holds no valid event, without retrying it", async () => {
    const queue = await mf.getQueueProducer("FLAG_EVENTS");
    const before = (await reported()).length;
    await queue.send("not json at all");
    await queue.send({ id: 42, type: "flag.updated" });
    await expect
      .poll(async () => (await reported()).slice(before).filter((r) => r.code === "invalid_payload"), {
        timeout: 10_000,
      })
      .toHaveLength(2);
    // A valid event sent after them is consumed; the invalid ones were not delivered again.
    const id = `evt_${randomUUID()}`;
    expect((await deliver(eventBody(id))).status).toBe(202);
    await expect.poll(() => seen(id), { timeout: 10_000 }).toHaveLength(1);
    await sleep(300);
    const invalid = (await reported()).slice(before).filter((r) => r.code === "invalid_payload");
    expect(invalid.map((r) => r.attempts)).toEqual([1, 1]);
  });

  it("answers 413 payload_too_large at once to an event past a queue message's 128 KB, on every retry, and releases the claim", async () => {
    const id = `evt_${randomUUID()}`;
    // Queues take messages of at most 128 KB: sending this one would fail on every retry.
    for (let attempt = 0; attempt < 2; attempt++) {
      const refused = await deliver(eventBody(id, "new-checkout", 200_000));
      const json = (await refused.json()) as { error: { code: string; message: string } };
      expect([refused.status, json.error.code, refused.headers.get("retry-after")]).toEqual([
        413,
        "payload_too_large",
        null,
      ]);
      expect(json.error.message).toMatch(/^the event is \d+ bytes as a queue message, over the 127900 bytes/);
    }
    // Nothing was enqueued, and the claim is released: a copy that fits is taken.
    const retry = await deliver(eventBody(id));
    expect(retry.status).toBe(202);
    await expect.poll(() => seen(id), { timeout: 10_000 }).toHaveLength(1);
  });
});

describe("examples/cloudflare-worker-dedupe", () => {
  let example: Miniflare;
  beforeAll(async () => {
    // As wrangler.toml binds it: the real DedupeObject, the queue produced and consumed, KV.
    example = await startWorker("examples/cloudflare-worker-dedupe/worker.ts", {
      bindings: { WEBHOOK_SECRET: SECRET },
      durableObjects: { DEDUPE: "DedupeObject" },
      queueProducers: { FLAG_EVENTS: "flag-events" },
      queueConsumers: { "flag-events": { maxBatchSize: 10, maxBatchTimeout: 0.05, maxRetries: 5, retryDelay: 0 } },
      kvNamespaces: ["AUDIT"],
    });
  }, 60_000);
  afterAll(() => example?.dispose());

  it("worker.ts answers 202, consumes the event into KV, answers a duplicate as one, and refuses a forgery", async () => {
    const post = async (body: string, signature?: string) =>
      example.dispatchFetch("http://worker/", {
        method: "POST",
        headers: { "service-signature": signature ?? (await sign(body)) },
        body,
      });
    const id = `evt_${randomUUID()}`;
    const flag = `flag-${randomUUID().slice(0, 8)}`;
    const body = eventBody(id, flag);
    expect((await post(body)).status).toBe(202);
    const kv = await example.getKVNamespace("AUDIT");
    await expect
      .poll(async () => JSON.parse((await kv.get(`flag:${flag}`)) ?? "null"), { timeout: 10_000 })
      .toEqual({
        event: id,
        by: "dana@example.com",
        changes: [{ path: "on", from: false, to: true }],
      });
    const again = await post(body);
    expect([again.status, again.headers.get("webhook-duplicate")]).toEqual([204, "true"]);
    const forged = await post(body, await sign(`${body} `));
    expect(forged.status).toBe(401);
    expect((await post("{}", "zz")).status).toBe(401);
  });
});

describe("the Queues hand-off, edge by edge", () => {
  /** Sends a body of one kind straight to the queue from inside the Worker (fixture: rawBody). */
  async function sendRaw(kind: string, json = ""): Promise<void> {
    const response = await mf.dispatchFetch("http://worker/send", {
      method: "POST",
      body: JSON.stringify({ kind, json }),
    });
    expect(response.status).toBe(204);
  }

  /** Waits for the consumer's report of the next message that failed after `before` reports. */
  async function nextReport(before: number): Promise<Reported> {
    await expect.poll(async () => (await reported()).length, { timeout: 10_000 }).toBeGreaterThan(before);
    return (await reported())[before] as Reported;
  }

  /** No promise rejected without a handler while `run` and the `ms` after it go on. */
  async function unhandledDuring(run: () => Promise<unknown>, ms: number): Promise<unknown[]> {
    const unhandled: unknown[] = [];
    const listen = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", listen);
    try {
      await run().catch(() => undefined);
      await sleep(ms);
    } finally {
      process.off("unhandledRejection", listen);
    }
    return unhandled;
  }

  it("consumes the event's JSON sent as text, as bytes and as a Uint8Array, as it does a JSON message", async () => {
    for (const kind of ["text", "bytes", "view"]) {
      const id = `evt_${kind}_${randomUUID()}`;
      await sendRaw(kind, eventBody(id));
      await expect
        .poll(() => seen(id), { timeout: 10_000 })
        .toEqual([{ key: `seen:${id}:1`, value: { type: "flag.updated", flag: "new-checkout", changes: 1 } }]);
    }
  });

  it("acks a message no JSON can hold as invalid_payload, with why as its cause", async () => {
    const before = (await reported()).length;
    await sendRaw("bigint");
    const report = await nextReport(before);
    expect(report).toMatchObject({
      attempts: 1,
      code: "invalid_payload",
      message: "the message does not hold an event",
    });
    expect(report.cause).toBe("Do not know how to serialize a BigInt");
  });

  it("reports a text that is no event with the parser's own error, as the receiver would", async () => {
    const parserSays = (() => {
      try {
        parseEvent("not json at all");
      } catch (error) {
        return error as WebhookError;
      }
    })();
    expect(parserSays).toBeInstanceOf(WebhookError);
    const before = (await reported()).length;
    await sendRaw("text", "not json at all");
    const report = await nextReport(before);
    expect(report).toMatchObject({ attempts: 1, code: parserSays?.code, message: parserSays?.message });
  });

  it("enqueueTo refuses, when it is made, a missing binding and a timeout no timer can wait", () => {
    const needs = new TypeError("flag-webhooks: enqueueTo(queue) needs a Queue producer binding");
    expect(() => enqueueTo(undefined as never)).toThrow(needs);
    expect(() => enqueueTo({} as never)).toThrow(needs);
    const queue = { send: async () => undefined };
    for (const timeout of ["soon", 0, -1]) {
      expect(() => enqueueTo(queue, { timeout })).toThrow(/option "timeout" must be a positive number/);
    }
    // Its timer waits at most 2³¹−1 ms: a longer one fires after 1 ms and would refuse every event.
    expect(() => enqueueTo(queue, { timeout: 2 ** 31 })).toThrow(/option "timeout" must be at most 2147483647 ms/);
    expect(typeof enqueueTo(queue, { timeout: 2 ** 31 - 1 })).toBe("function");
    expect(typeof enqueueTo(queue, { timeout: "2s" })).toBe("function");
  });

  it("enqueueTo from Node through the real producer binding: 202, the consumer gets the event, no timer left", async () => {
    const queue = await mf.getQueueProducer("FLAG_EVENTS");
    const id = `evt_node_${randomUUID()}`;
    const enqueue = enqueueTo(queue, { timeout: 4321 });
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    const clearTimer = vi.spyOn(globalThis, "clearTimeout");
    try {
      expect(await enqueue(parseEvent(eventBody(id)))).toEqual({ status: 202 });
      // The timer that bounded the send is cleared with the answer, not left to hold the process.
      const bound = setTimer.mock.calls.findIndex(([, ms]) => ms === 4321);
      expect(bound).toBeGreaterThanOrEqual(0);
      expect(clearTimer.mock.calls.map(([timer]) => timer)).toContain(setTimer.mock.results[bound]?.value);
    } finally {
      setTimer.mockRestore();
      clearTimer.mockRestore();
    }
    await expect.poll(() => seen(id), { timeout: 10_000 }).toHaveLength(1);
  });

  it("enqueueTo sends a message of 127,900 bytes through the real binding, and refuses one byte more without sending it", async () => {
    const producer = await mf.getQueueProducer("FLAG_EVENTS");
    let sends = 0;
    const queue = {
      send(...args: Parameters<typeof producer.send>) {
        sends++;
        return producer.send(...args);
      },
    };
    const sized = (id: string, bytes: number) => {
      const base = new TextEncoder().encode(JSON.stringify(parseEvent(eventBody(id, "sized", 1)))).length;
      return parseEvent(eventBody(id, "sized", 1 + bytes - base));
    };
    const fits = `evt_fits_${randomUUID()}`;
    expect(await enqueueTo(queue)(sized(fits, 127_900))).toEqual({ status: 202 });
    await expect.poll(() => seen(fits), { timeout: 10_000 }).toHaveLength(1);
    const over = await enqueueTo(queue)(sized(`evt_over_${randomUUID()}`, 127_901)).catch((e: unknown) => e);
    expect(over).toBeInstanceOf(WebhookError);
    expect(over).toMatchObject({ code: "payload_too_large", status: 413 });
    expect(sends).toBe(1);
    // A signed message counts its signature too.
    const signed = await enqueueTo(queue, { signWith: "a-key-of-the-app-32-bytes-long!!" })(
      sized(`evt_signed_${randomUUID()}`, 127_850),
    ).catch((e: unknown) => e);
    expect(signed).toMatchObject({ code: "payload_too_large" });
    expect(sends).toBe(1);
  });

  // Stand-ins for a binding that fails in a way miniflare's real one cannot be made to: one that
  // never answers, one that throws as it is called, one that refuses after the time is up.
  it("enqueueTo answers store_unavailable when the queue does not accept the event within its timeout", async () => {
    const enqueue = enqueueTo({ send: () => new Promise(() => undefined) }, { timeout: 30 });
    const error = await enqueue(parseEvent(eventBody("evt_stalled"))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WebhookError);
    expect(error).toMatchObject({ code: "store_unavailable", message: "the event queue is unavailable; retry later" });
    expect(((error as WebhookError).cause as Error).message).toBe("the queue did not accept the event within 30 ms");
  });

  it("enqueueTo answers store_unavailable, with the cause, when the binding throws or refuses late", async () => {
    const gone = new Error("binding gone");
    const thrown = await enqueueTo({
      send: () => {
        throw gone;
      },
    })(parseEvent(eventBody("evt_thrown"))).catch((e: unknown) => e);
    expect(thrown).toMatchObject({ code: "store_unavailable" });
    expect((thrown as WebhookError).cause).toBe(gone);
    // Refused after the timeout answered: that refusal is handled, not left unhandled.
    const late = enqueueTo(
      { send: () => new Promise((_, reject) => setTimeout(() => reject(new Error("late")), 40)) },
      { timeout: 10 },
    );
    expect(await unhandledDuring(() => late(parseEvent(eventBody("evt_late"))), 100)).toEqual([]);
  });

  it("consumeEvents refuses, when it is made, options without an onEvent or with an onError that is no function", () => {
    const onEvent = () => undefined;
    const noHandler = new TypeError('flag-webhooks: option "onEvent" must be a function');
    expect(() => consumeEvents(undefined as never)).toThrow(noHandler);
    expect(() => consumeEvents({} as never)).toThrow(noHandler);
    expect(() => consumeEvents({ onEvent, onError: "log" as never })).toThrow(
      new TypeError('flag-webhooks: option "onError" must be a function'),
    );
    expect(typeof consumeEvents({ onEvent })).toBe("function");
    expect(typeof consumeEvents({ onEvent, onError: () => undefined })).toBe("function");
  });

  it("consumeEvents without onError logs each failed message: invalid ones acked, failing ones retried", async () => {
    // Messages of the shape the runtime hands a consumer (EventMessage), made here to read the log.
    const done: string[] = [];
    const message = (id: string, body: unknown): EventMessage => ({
      id,
      body,
      attempts: 1,
      ack: () => done.push(`${id} ack`),
      retry: () => done.push(`${id} retry`),
    });
    const failure = new Error("downstream unavailable");
    const log = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      await consumeEvents({
        onEvent() {
          throw failure;
        },
      })(
        {
          queue: "flag-events",
          // The runtime refuses to send an undefined body; a consumer called directly may get one.
          messages: [message("m1", "not json"), message("m2", eventBody("evt_m2")), message("m3", undefined)],
        },
        {},
        {},
      );
      expect(done).toEqual(["m1 ack", "m2 retry", "m3 ack"]);
      expect(log.mock.calls.map(([text]) => text)).toEqual([
        "flag-webhooks: queue message m1 failed (invalid_payload: acked, not retried):",
        "flag-webhooks: queue message m2 failed (retried):",
        "flag-webhooks: queue message m3 failed (invalid_payload: acked, not retried):",
      ]);
      expect(log.mock.calls[0]?.[1]).toBeInstanceOf(WebhookError);
      expect(log.mock.calls[1]?.[1]).toBe(failure);
      const noBody = log.mock.calls[2]?.[1] as WebhookError;
      expect([noBody.message, (noBody.cause as Error).message]).toEqual([
        "the message does not hold an event",
        "the message has no body",
      ]);
    } finally {
      log.mockRestore();
    }
  });
});
