import type { Job } from "bullmq";
import { sign } from "flag-webhooks";
import { enqueueTo as enqueueToBullmq, processEvents } from "flag-webhooks/bullmq";
import { consumeEvents, enqueueTo as enqueueToCloudflare } from "flag-webhooks/cloudflare";
import { createEvent } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BullmqHandOff, startBullmqHandOff } from "../support/bullmq-hand-off.js";
import {
  QUEUE_KEY,
  QUEUE_KEY_OLD,
  type QueuesWorker,
  startQueuesWorker,
  WEBHOOK_SECRET,
} from "../support/queues-worker.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// Signed queue messages: with signWith the producer adds an HMAC of the event to each message,
// and a consumer with verifyWith hands on only messages signed with one of its keys. Anything
// else that another producer put on the queue (or in Redis) never reaches onEvent, is not
// retried, and is reported. On BullMQ (a real redis-server) and Cloudflare Queues (workerd).
const availability = redisAvailability();
const FIELD = "flag-webhooks.signature";

/** A message as a producer holding `key` makes it: the event, and the HMAC of its JSON. */
async function signedBy(key: string, event: object): Promise<Record<string, unknown>> {
  return { ...event, [FIELD]: await sign({ secret: key, payload: JSON.stringify(event) }) };
}

const NOT_SIGNED = "the message is not signed, and verifyWith requires a signature";
const NO_KEY = "the message's signature matches no key of verifyWith";

describe("options", () => {
  const bullQueue = { add: async () => undefined } as never;
  const cfQueue = { send: async () => undefined };
  const onEvent = () => undefined;

  it("signWith is one non-empty key, on both queues", () => {
    for (const signWith of ["", ["a"], 7]) {
      expect(() => enqueueToBullmq(bullQueue, { signWith } as never)).toThrow(
        'flag-webhooks: option "signWith" of enqueueTo must be a non-empty string',
      );
      expect(() => enqueueToCloudflare(cfQueue, { signWith } as never)).toThrow(
        'flag-webhooks: option "signWith" of enqueueTo must be a non-empty string',
      );
    }
  });

  it("verifyWith is a non-empty key or a non-empty list of them, on both queues, and the error holds no key", () => {
    for (const verifyWith of ["", [], ["new-key", ""], [7], null]) {
      expect(() => consumeEvents({ onEvent, verifyWith } as never)).toThrow(
        'flag-webhooks: option "verifyWith" of consumeEvents must be a non-empty string, or a non-empty list of them',
      );
      expect(() => processEvents({ queue: "q", connection: {}, onEvent, verifyWith } as never)).toThrow(
        'flag-webhooks: option "verifyWith" of processEvents must be a non-empty string, or a non-empty list of them',
      );
    }
  });
});

describe("Cloudflare Queues", () => {
  let worker: QueuesWorker;
  beforeAll(async () => {
    worker = await startQueuesWorker();
  }, 60_000);
  afterAll(() => worker?.dispose());

  async function handledOn(queue: string, id: unknown): Promise<Record<string, unknown> | undefined> {
    return (await worker.handled()).find((entry) => entry.queue === queue && entry.event.id === id)?.event;
  }

  /** Sends a body to the signed queue and returns what its consumer reported of it. */
  async function refusal(body: unknown) {
    const before = (await worker.reported()).length;
    await worker.send("signed", body);
    await expect.poll(async () => (await worker.reported()).length, { timeout: 10_000 }).toBe(before + 1);
    const { queue, attempts, code, message } = (await worker.reported())[before] ?? {};
    return { queue, attempts, code, message };
  }

  it("hands on events signed with either key of verifyWith (rotation), as the receiver verified them", async () => {
    const fresh = createEvent("flag.updated");
    const older = createEvent("rollout.step");
    expect((await worker.deliver("/signed/new", fresh)).status).toBe(202);
    expect((await worker.deliver("/signed/old", older)).status).toBe(202);
    await expect.poll(() => handledOn("signed", fresh.id), { timeout: 10_000 }).toEqual(fresh);
    await expect.poll(() => handledOn("signed", older.id), { timeout: 10_000 }).toEqual(older);
  });

  it("never hands on an unsigned message from another producer: acked once and reported invalid_signature", async () => {
    const forged = createEvent("flag.updated", { data: { flag: "kill-switch" } });
    expect(await refusal(forged)).toEqual({
      queue: "signed",
      attempts: 1,
      code: "invalid_signature",
      message: NOT_SIGNED,
    });
    expect(await refusal(JSON.stringify(forged))).toMatchObject({ code: "invalid_signature", message: NOT_SIGNED });
    expect(await handledOn("signed", forged.id)).toBeUndefined();
  });

  it("never hands on a message signed with another key, or whose event was changed after signing", async () => {
    const other = createEvent("flag.deleted");
    expect((await worker.deliver("/signed/other", other)).status).toBe(202);
    await expect
      .poll(async () => (await worker.reported()).filter((r) => r.message === NO_KEY).length, { timeout: 10_000 })
      .toBe(1);
    const event = createEvent("flag.updated");
    const changed = { ...(await signedBy(QUEUE_KEY, event)), data: { ...event.data, flag: "kill-switch" } };
    expect(await refusal(changed)).toEqual({
      queue: "signed",
      attempts: 1,
      code: "invalid_signature",
      message: NO_KEY,
    });
    expect(await refusal({ ...event, [FIELD]: 42 })).toMatchObject({ code: "invalid_signature", message: NO_KEY });
    expect(await handledOn("signed", other.id)).toBeUndefined();
    expect(await handledOn("signed", event.id)).toBeUndefined();
  });

  it("a consumer without verifyWith reads a signed message too, and hands on the event without the signature", async () => {
    const event = createEvent("flag.created");
    await worker.send("plain", await signedBy(QUEUE_KEY, event));
    await expect.poll(() => handledOn("plain", event.id), { timeout: 10_000 }).toEqual(event);
  });
});

describe.skipIf(!availability.available)("BullMQ", () => {
  let redis: RedisServer;
  let guarded: BullmqHandOff;
  let open: BullmqHandOff;
  const failures: { id: string | undefined; reason: string }[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    guarded = startBullmqHandOff(redis.port, WEBHOOK_SECRET, { verifyWith: [QUEUE_KEY, QUEUE_KEY_OLD] });
    open = startBullmqHandOff(redis.port, WEBHOOK_SECRET);
    guarded.worker.on("failed", (job: Job | undefined, error: Error) =>
      failures.push({ id: job?.id, reason: error.message }),
    );
  }, 60_000);
  afterAll(async () => {
    await guarded?.close();
    await open?.close();
    await stopRedis(redis);
  });

  it("runs jobs signed with either key of verifyWith (rotation); the job's data is the event and its signature", async () => {
    const fresh = createEvent("flag.updated");
    const older = createEvent("rollout.guard_triggered");
    expect((await guarded.deliver(fresh, { signWith: QUEUE_KEY })).status).toBe(202);
    expect((await guarded.deliver(older, { signWith: QUEUE_KEY_OLD })).status).toBe(202);
    await expect.poll(() => guarded.handled.find((e) => e.id === fresh.id), { timeout: 10_000 }).toEqual(fresh);
    await expect.poll(() => guarded.handled.find((e) => e.id === older.id), { timeout: 10_000 }).toEqual(older);
    const job = await guarded.queue.getJob(`event-${fresh.id}`);
    expect(job?.data).toEqual(await signedBy(QUEUE_KEY, fresh));
  });

  it("fails a job nobody signed at once, never runs it, and tells worker.on('failed')", async () => {
    const forged = createEvent("flag.updated", { data: { flag: "kill-switch" } });
    await guarded.queue.add("flag.updated", forged, { jobId: "forged", attempts: 5 });
    const reason = `job forged is not signed by our receiver: ${NOT_SIGNED}`;
    await expect.poll(() => guarded.failed("forged"), { timeout: 10_000 }).toEqual({ attempts: 1, reason });
    expect(failures).toContainEqual({ id: "forged", reason });
    expect(guarded.handled.find((e) => e.id === forged.id)).toBeUndefined();
  });

  it("fails a job signed with another key, or whose event was changed after signing", async () => {
    const other = createEvent("flag.deleted");
    expect((await guarded.deliver(other, { signWith: "a key of someone else" })).status).toBe(202);
    const event = createEvent("flag.updated");
    const changed = { ...(await signedBy(QUEUE_KEY, event)), data: { ...event.data, flag: "kill-switch" } };
    await guarded.queue.add("flag.updated", changed, { jobId: "changed", attempts: 5 });
    for (const jobId of [`event-${other.id}`, "changed"]) {
      await expect
        .poll(() => guarded.failed(jobId), { timeout: 10_000 })
        .toEqual({ attempts: 1, reason: `job ${jobId} is not signed by our receiver: ${NO_KEY}` });
    }
    expect(guarded.handled.filter((e) => e.id === other.id || e.id === event.id)).toEqual([]);
  });

  it("signs an event that holds the reserved field itself without it, and hands it on without it", async () => {
    const event = createEvent("flag.updated");
    expect((await guarded.deliver({ ...event, [FIELD]: "the service's own" }, { signWith: QUEUE_KEY })).status).toBe(
      202,
    );
    await expect.poll(() => guarded.handled.find((e) => e.id === event.id), { timeout: 10_000 }).toEqual(event);
  });

  it("a worker without verifyWith runs a signed job too, and hands on the event without the signature", async () => {
    const event = createEvent("flag.created");
    expect((await open.deliver(event, { signWith: QUEUE_KEY })).status).toBe(202);
    await expect.poll(() => open.handled.find((e) => e.id === event.id), { timeout: 10_000 }).toEqual(event);
  });
});
