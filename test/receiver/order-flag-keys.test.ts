import {
  type KnownWebhookEvent,
  MemoryOrderStore,
  type OrderStore,
  RedisOrderStore,
  type WebhookEvent,
} from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent, FlagMirror, inOrder, signedRequest } from "flag-webhooks/testing";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SECRET } from "../support/receiver.js";
import { type RedisServer, redisAvailability, startRedis, stopRedis } from "../support/redis-server.js";

// The flag key the receiver hands an OrderStore, on a real redis-server (through ioredis) and in
// memory. A flag is any string the sender signs; flag.created, flag.deleted and the rollout events
// carry data the spec does not give, so their flag may hold a lone surrogate. A client writes one
// as U+FFFD: before, "\uD800" and "\uDBFF" shared one Redis key with the flag "\uFFFD", and a late
// flag.deleted of one made the changes of the other stale.

const availability = redisAvailability();
let server: RedisServer | undefined;
let client: Redis | undefined;
beforeAll(async () => {
  if (!availability.available) return;
  server = await startRedis();
  client = new Redis(server.url);
});
afterAll(async () => {
  await client?.quit();
  await stopRedis(server);
});

let scopes = 0;
const stores: { name: string; available: boolean; store: () => OrderStore }[] = [
  { name: "MemoryOrderStore", available: true, store: () => new MemoryOrderStore() },
  {
    name: "RedisOrderStore",
    available: availability.available,
    store: () => new RedisOrderStore(client as Redis, { scope: `flag-keys-${++scopes}` }),
  },
];

describe.each(stores)("order on $name: flag keys", ({ available, store }) => {
  it.runIf(available)("keeps apart flags that differ only in a lone surrogate: the in-order state", async () => {
    const seen: WebhookEvent[] = [];
    const handle = webhookHandler({
      secret: SECRET,
      order: { store: store() },
      onEvent: (event) => void seen.push(event),
    });
    const history = [
      createEvent("flag.updated", { id: "evt_1", createdAt: "2026-11-21T09:01:00Z", data: { flag: "\uFFFD" } }),
      createEvent("flag.deleted", { id: "evt_2", createdAt: "2026-11-21T09:02:00Z", data: { flag: "\uD800" } }),
      createEvent("flag.deleted", { id: "evt_3", createdAt: "2026-11-21T09:03:00Z", data: { flag: "\uDBFF" } }),
    ] as KnownWebhookEvent[];
    // Delivered newest first.
    for (const event of [...history].reverse()) {
      expect((await handle(await signedRequest({ secret: SECRET, event }))).status).toBe(204);
    }
    const expected = new FlagMirror();
    for (const event of inOrder(history)) expected.apply(event);
    const actual = new FlagMirror();
    for (const event of seen) actual.apply(event);
    expect(actual.snapshot()).toEqual(expected.snapshot());
    expect(seen.map((event) => event.id).sort()).toEqual(["evt_1", "evt_2", "evt_3"]);
  });
});
