import { createEvent } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BullmqHandOff, startBullmqHandOff } from "../support/bullmq-hand-off.js";
import { type QueuesWorker, startQueuesWorker, WEBHOOK_SECRET } from "../support/queues-worker.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// One serialisation of an event for every hand-off: what the receiver verified comes out of the
// queue the same, on BullMQ (a real redis-server) and on Cloudflare Queues (workerd, miniflare),
// and both consumers check a message with the same rules.
const availability = redisAvailability();

let cloudflare: QueuesWorker;
let redis: RedisServer | undefined;
let bullmq: BullmqHandOff | undefined;

beforeAll(async () => {
  cloudflare = await startQueuesWorker();
  if (availability.available) {
    redis = await startRedis();
    bullmq = startBullmqHandOff(redis.port, WEBHOOK_SECRET);
  }
}, 60_000);

afterAll(async () => {
  await bullmq?.close();
  await stopRedis(redis);
  await cloudflare?.dispose();
});

/** An event of a type this version does not know, as the service would send it. */
function archived(): Record<string, unknown> {
  return { ...createEvent("flag.created", { data: { flag: "old-banner" } }), type: "flag.archived" };
}

/** What onEvent got from the Cloudflare consumer for an event id, once it got it. */
async function consumedOnCloudflare(id: unknown): Promise<Record<string, unknown>> {
  let found: Record<string, unknown> | undefined;
  await expect
    .poll(
      async () => {
        found = (await cloudflare.handled()).find((entry) => entry.event.id === id)?.event;
        return found !== undefined;
      },
      { timeout: 10_000 },
    )
    .toBe(true);
  return found as Record<string, unknown>;
}

async function consumedOnBullmq(id: unknown): Promise<Record<string, unknown>> {
  const handled = (bullmq as BullmqHandOff).handled;
  await expect.poll(() => handled.some((event) => event.id === id), { timeout: 10_000 }).toBe(true);
  return handled.find((event) => event.id === id) as unknown as Record<string, unknown>;
}

describe("an event of a type this version does not know", () => {
  it("reaches the Cloudflare consumer as the receiver verified it: type unknown, the service's type in originalType", async () => {
    const event = archived();
    expect((await cloudflare.deliver("/plain", event)).status).toBe(202);
    expect(await consumedOnCloudflare(event.id)).toEqual({
      ...event,
      type: "unknown",
      originalType: "flag.archived",
    });
  });

  it.skipIf(!availability.available)("reaches the BullMQ worker the same", async () => {
    const event = archived();
    expect((await (bullmq as BullmqHandOff).deliver(event)).status).toBe(202);
    expect(await consumedOnBullmq(event.id)).toEqual({ ...event, type: "unknown", originalType: "flag.archived" });
  });

  it.skipIf(!availability.available)(
    "is read the same from a message the previous version queued (the event object), on both queues",
    async () => {
      // What enqueueTo sent before this version, on both queues: the receiver's event as JSON data.
      const queued = { ...archived(), type: "unknown", originalType: "flag.archived" };
      const bodies: Record<string, unknown>[] = [queued, { ...createEvent("flag.updated") }];
      for (const body of bodies) {
        await cloudflare.send("plain", body);
        await (bullmq as BullmqHandOff).queue.add(String(body.type), body, { jobId: `old-${body.id}` });
      }
      for (const body of bodies) {
        const fromCloudflare = await consumedOnCloudflare(body.id);
        expect(fromCloudflare).toEqual(body);
        expect(await consumedOnBullmq(body.id)).toEqual(fromCloudflare);
      }
    },
  );
});

describe("the checks of a message", () => {
  const updated = createEvent("flag.updated");
  // Messages another producer could put on either queue, and why each is refused.
  const invalid: [string, unknown, string][] = [
    ["no-original", { ...archived(), type: "unknown" }, "originalType must be a string"],
    ["number-original", { ...archived(), type: "unknown", originalType: 7 }, "originalType must be a string"],
    [
      "known-original",
      { ...archived(), type: "unknown", originalType: "flag.deleted" },
      'type is "unknown" but originalType is the known type "flag.deleted"',
    ],
    ["bad-flag", { ...updated, data: { ...updated.data, flag: 42 } }, "data.flag must be a string"],
    [
      "bad-created",
      { ...updated, createdAt: "2026-01-01T09:30:00+02:00" },
      "createdAt must be an ISO 8601 UTC timestamp, such as 2026-11-21T09:30:00Z",
    ],
    ["no-data", { ...archived(), type: "unknown", originalType: "flag.archived", data: undefined }, "data is missing"],
    ["null", null, "body must be an object"],
  ];

  it("are the same on Cloudflare Queues: each invalid message acked once, with the reason, never handed on", async () => {
    const reasons: string[] = [];
    for (const [, body] of invalid) {
      const before = (await cloudflare.reported()).length;
      await cloudflare.send("plain", body);
      await expect.poll(async () => (await cloudflare.reported()).length, { timeout: 10_000 }).toBe(before + 1);
      const report = (await cloudflare.reported())[before];
      expect([report?.code, report?.attempts]).toEqual(["invalid_payload", 1]);
      reasons.push(report?.message as string);
    }
    expect(reasons).toEqual(invalid.map(([, , reason]) => reason));
    const ids = new Set(invalid.map(([, body]) => (body as { id?: unknown } | null)?.id));
    expect((await cloudflare.handled()).filter((entry) => ids.has(entry.event.id))).toEqual([]);
  });

  it.skipIf(!availability.available)(
    "are the same on BullMQ: each invalid job failed at once, with the reason",
    async () => {
      const queue = (bullmq as BullmqHandOff).queue;
      for (const [jobId, body] of invalid) await queue.add("flag.updated", body as never, { jobId, attempts: 3 });
      const failed = (jobId: string) => (bullmq as BullmqHandOff).failed(jobId);
      for (const [jobId, , reason] of invalid) {
        await expect
          .poll(() => failed(jobId), { timeout: 10_000 })
          .toEqual({ attempts: 1, reason: `job ${jobId} does not hold a valid flag-webhooks event: ${reason}` });
      }
      const ids = new Set(invalid.map(([, body]) => (body as { id?: unknown } | null)?.id));
      expect((bullmq as BullmqHandOff).handled.filter((event) => ids.has(event.id))).toEqual([]);
    },
  );
});
