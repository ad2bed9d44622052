import { createHmac } from "node:crypto";
import { createRouter, MemoryDedupeStore, RedisDedupeStore, SIGNATURE_HEADER, verifyEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it } from "vitest";

// The delivery layer's edges that the mutation run (issue 20, part 4) showed no test pinned down:
// the replay window's exact bounds and the durations it takes, the limits on timer options, the
// memory store's clock and sweep, and the router's refusal of a type list it cannot route.

const secret = "delivery-edges-secret";
const SENT = Date.parse("2026-11-23T12:00:00Z");

/** A signed flag.updated delivery created at `createdAt`. */
function delivery(createdAt = new Date(SENT).toISOString()) {
  const payload = JSON.stringify({
    id: "evt_edges",
    type: "flag.updated",
    createdAt,
    environment: "production",
    data: { flag: "f", changes: [], actor: { type: "user", email: "a@example.com" } },
  });
  return { secret, payload, signature: createHmac("sha256", secret).update(payload).digest("hex") };
}

/** What verifyEvent settles with at clock `now`: "ok", or the refusal's code. */
async function verdict(options: { maxAge?: number | string; createdAt?: string }, now: number): Promise<string> {
  try {
    await verifyEvent({ ...delivery(options.createdAt), maxAge: options.maxAge, now: () => now });
    return "ok";
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe("the replay window", () => {
  it("passes an event exactly maxAge old, and refuses it one millisecond later", async () => {
    expect(await verdict({ maxAge: 300_000 }, SENT + 300_000)).toBe("ok");
    expect(await verdict({ maxAge: 300_000 }, SENT + 300_001)).toBe("event_expired");
  });

  it("passes an event dated exactly the minute of clock skew ahead, and refuses one a millisecond further, saying so", async () => {
    expect(await verdict({ maxAge: "5m" }, SENT - 60_000)).toBe("ok");
    const refused = verifyEvent({ ...delivery(), maxAge: "5m", now: () => SENT - 60_001 });
    await expect(refused).rejects.toMatchObject({
      code: "event_expired",
      status: 401,
      message: "event is dated more than 60000 ms in the future",
    });
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY])("fails closed on a clock that answers %s", async (reading) => {
    const refused = verifyEvent({ ...delivery(), maxAge: "5m", now: () => reading });
    await expect(refused).rejects.toThrow(
      new TypeError(`flag-webhooks: the clock ("now") must return a finite number of ms, got ${reading}`),
    );
  });

  it.each([
    ["500", 500],
    ["1.5s", 1500],
    ["1.25 s", 1250],
    [" 2m ", 120_000],
    ["1H", 3_600_000],
    ["1d", 86_400_000],
    ["250ms", 250],
    ["12s", 12_000],
  ])("takes maxAge %j as %i ms", async (maxAge, ms) => {
    expect(await verdict({ maxAge }, SENT + ms)).toBe("ok");
    expect(await verdict({ maxAge }, SENT + ms + 1)).toBe("event_expired");
  });

  it.each(["x5m", "5mx", "5 minutes", "1.s", ".5s", "5y", "-5m", "0", "", {}, true])(
    "refuses maxAge %j, naming the option and the value",
    async (maxAge) => {
      await expect(verifyEvent({ ...delivery(), maxAge: maxAge as never })).rejects.toThrow(
        new TypeError(
          `flag-webhooks: option "maxAge" must be a positive number of milliseconds or a duration such as "5m", got ${JSON.stringify(maxAge)}`,
        ),
      );
    },
  );

  it("refuses a maxAge past the largest safe number of ms, without the timer's explanation", async () => {
    await expect(verifyEvent({ ...delivery(), maxAge: 2 ** 60 })).rejects.toThrow(
      new TypeError(`flag-webhooks: option "maxAge" must be at most ${Number.MAX_SAFE_INTEGER} ms, got ${2 ** 60}`),
    );
  });
});

describe("durations a timer waits", () => {
  const TIMER_MAX = 2 ** 31 - 1;
  const tooLong = (option: string, value: unknown) =>
    new TypeError(
      `flag-webhooks: option "${option}" must be at most ${TIMER_MAX} ms (about 24.8 days, the longest a timer can wait), got ${JSON.stringify(value)}`,
    );

  it("takes a bodyTimeout of 2^31-1 ms, and refuses one a millisecond longer or of 30 days, explaining why", () => {
    expect(() => webhookHandler({ secret, bodyTimeout: TIMER_MAX, onEvent: () => {} })).not.toThrow();
    expect(() => webhookHandler({ secret, bodyTimeout: TIMER_MAX + 1, onEvent: () => {} })).toThrow(
      tooLong("bodyTimeout", TIMER_MAX + 1),
    );
    expect(() => webhookHandler({ secret, bodyTimeout: "30d", onEvent: () => {} })).toThrow(
      tooLong("bodyTimeout", "30d"),
    );
  });

  it("limits the dedupe store timeout and RedisDedupeStore's own timeout the same way", () => {
    const store = new MemoryDedupeStore();
    expect(() => webhookHandler({ secret, dedupe: { store, ttl: "1d", timeout: "25d" }, onEvent: () => {} })).toThrow(
      tooLong("dedupe.timeout", "25d"),
    );
    const client = { call: async () => null };
    expect(() => new RedisDedupeStore(client, { scope: "app", timeout: TIMER_MAX + 1 })).toThrow(
      tooLong("timeout", TIMER_MAX + 1),
    );
    expect(() => new RedisDedupeStore(client, { scope: "app", timeout: TIMER_MAX })).not.toThrow();
  });
});

describe("MemoryDedupeStore", () => {
  it.each([Number.NaN, Number.POSITIVE_INFINITY, "1000", undefined])(
    "refuses to claim with a clock that answers %j: dedupe must not turn itself off",
    (reading) => {
      const store = new MemoryDedupeStore({ now: () => reading as number });
      expect(() => store.claim("evt_1", 1000)).toThrow(
        new TypeError("flag-webhooks: MemoryDedupeStore's now() must return a finite number of ms"),
      );
    },
  );

  it("sweeps at most four expired ids per write, so a write costs the same however many expired", () => {
    let now = 0;
    const store = new MemoryDedupeStore({ now: () => now });
    for (let i = 0; i < 10; i++) store.complete(`old-${i}`, 10);
    now = 1000;
    store.complete("new-0", 10_000);
    expect(store.size).toBe(7); // 10 expired + 1 new - 4 swept
    store.claim("new-1", 10_000);
    expect(store.size).toBe(4);
    store.complete("new-2", 10_000);
    expect(store.size).toBe(3); // the last 2 expired go, the live ids stay
    // The expired ids are gone for good: each can be claimed afresh.
    expect(store.claim("old-0", 10_000)).toBe("claimed");
  });
});

describe("createRouter", () => {
  it.each([[["flag.updated", 5]], [[null]], [5], [null], [{ length: 1 }]])(
    "refuses to route %j, saying what it takes",
    (types) => {
      expect(() => createRouter().on(types as never, () => {})).toThrow(
        new TypeError("flag-webhooks: router.on() takes an event type or a list of them"),
      );
    },
  );

  it("routes an event whose type arrives in a list with others", async () => {
    const seen: string[] = [];
    const router = createRouter().on(["rollout.step", "flag.updated"], (event) => void seen.push(event.id));
    const event = await verifyEvent(delivery());
    await router(event);
    expect(seen).toEqual(["evt_edges"]);
  });
});

describe("webhookHandler with maxAge (the same window through an adapter)", () => {
  it("answers 401 event_expired past the window, and 204 inside it", async () => {
    const { payload, signature } = delivery();
    const post = (now: number) =>
      webhookHandler({ secret, maxAge: "1m", now: () => now, onEvent: () => {} })(
        new Request("http://localhost/webhooks", {
          method: "POST",
          body: payload,
          headers: { [SIGNATURE_HEADER]: signature },
        }),
      );
    expect((await post(SENT + 60_000)).status).toBe(204);
    const late = await post(SENT + 60_001);
    expect(late.status).toBe(401);
    expect(await late.json()).toEqual({
      error: { code: "event_expired", message: "event is older than the replay window of 60000 ms" },
    });
  });
});

describe("RedisDedupeStore with a client of its own", () => {
  it("passes the client's own error on at once, not as a timeout", async () => {
    const refused = new Error("READONLY You can't write against a read only replica.");
    const store = new RedisDedupeStore({ call: () => Promise.reject(refused) }, { scope: "app", timeout: "10s" });
    const began = Date.now();
    await expect(store.claim("evt_1", 1000)).rejects.toBe(refused);
    await expect(store.complete("evt_1", 1000)).rejects.toBe(refused);
    expect(Date.now() - began).toBeLessThan(5000);
  });

  it("reads a claim that found no key as claimed, whether the client says null or undefined", async () => {
    for (const nothing of [null, undefined]) {
      const sent: string[][] = [];
      const store = new RedisDedupeStore(
        {
          sendCommand: async (args: string[]) => {
            sent.push(args);
            return nothing;
          },
        },
        { scope: "app", prefix: "p:" },
      );
      expect(await store.claim("evt_1", 1500.2)).toBe("claimed");
      expect(sent[0]?.slice(0, 2)).toEqual(["SET", "p:app:evt_1"]);
      expect(sent[0]?.slice(3)).toEqual(["PX", "1501", "NX", "GET"]);
    }
  });
});
