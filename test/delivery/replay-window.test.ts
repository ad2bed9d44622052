import { SIGNATURE_HEADER, verifyEvent } from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { createEvent } from "flag-webhooks/testing";
import { describe, expect, it, vi } from "vitest";
import { signatureOf } from "../support/deliveries.js";

// The replay window (maxAge): its exact bounds, the minute of clock skew it allows ahead, the
// durations it takes, and the clock it reads, through verifyEvent and through an adapter. Each
// adapter's own refusal of an old event is in test/receiver/every-adapter.test.ts.

const secret = "replay-window-secret";
const SENT = Date.parse("2026-11-23T12:00:00Z");

/** A signed flag.updated delivery created at `createdAt`, as verifyEvent's options. */
async function delivery(createdAt = new Date(SENT).toISOString()) {
  const payload = JSON.stringify(createEvent("flag.updated", { id: "evt_window", createdAt }));
  return { secret, payload, signature: await signatureOf(secret, payload) };
}

/** What verifyEvent settles with at clock `now`: "ok", or the refusal's code. */
async function verdict(options: { maxAge?: number | string; createdAt?: string }, now: number): Promise<string> {
  try {
    await verifyEvent({ ...(await delivery(options.createdAt)), maxAge: options.maxAge, now: () => now });
    return "ok";
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe("the replay window", () => {
  it("is off without maxAge: an event a year old, or dated an hour ahead, is returned", async () => {
    for (const now of [SENT + 365 * 86_400_000, SENT - 3_600_000]) {
      const event = await verifyEvent({ ...(await delivery()), now: () => now });
      expect(event.id).toBe("evt_window");
    }
  });

  it("without maxAge, never reads the clock", async () => {
    const now = vi.fn(() => Number.NaN);
    await verifyEvent({ ...(await delivery()), now });
    expect(now).not.toHaveBeenCalled();
  });

  it("passes an event exactly maxAge old, and refuses it one millisecond later as 401 event_expired, saying so", async () => {
    expect(await verdict({ maxAge: 300_000 }, SENT + 300_000)).toBe("ok");
    const refused = verifyEvent({ ...(await delivery()), maxAge: "5m", now: () => SENT + 300_001 });
    await expect(refused).rejects.toMatchObject({
      code: "event_expired",
      status: 401,
      message: "event is older than the replay window of 300000 ms",
    });
  });

  it("passes an event dated exactly the minute of clock skew ahead, and refuses one a millisecond further, saying so", async () => {
    expect(await verdict({ maxAge: "5m" }, SENT - 60_000)).toBe("ok");
    const refused = verifyEvent({ ...(await delivery()), maxAge: "5m", now: () => SENT - 60_001 });
    await expect(refused).rejects.toMatchObject({
      code: "event_expired",
      status: 401,
      message: "event is dated more than 60000 ms in the future",
    });
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY])("fails closed on a clock that answers %s", async (reading) => {
    const refused = verifyEvent({ ...(await delivery()), maxAge: "5m", now: () => reading });
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
      await expect(verifyEvent({ ...(await delivery()), maxAge: maxAge as never })).rejects.toThrow(
        new TypeError(
          `flag-webhooks: option "maxAge" must be a positive number of milliseconds or a duration such as "5m", got ${JSON.stringify(maxAge)}`,
        ),
      );
    },
  );

  it("names the maxAge option when its value is not a duration, before looking at the delivery", async () => {
    const { payload } = await delivery();
    await expect(verifyEvent({ secret, payload, signature: "not-even-hex", maxAge: "soon" })).rejects.toThrow(
      new TypeError(
        'flag-webhooks: option "maxAge" must be a positive number of milliseconds or a duration such as "5m", got "soon"',
      ),
    );
  });

  it("refuses a maxAge past the largest safe number of ms, without the timer's explanation", async () => {
    await expect(verifyEvent({ ...(await delivery()), maxAge: 2 ** 60 })).rejects.toThrow(
      new TypeError(`flag-webhooks: option "maxAge" must be at most ${Number.MAX_SAFE_INTEGER} ms, got ${2 ** 60}`),
    );
  });
});

describe("webhookHandler with maxAge (the same window through an adapter)", () => {
  it("answers 401 event_expired past the window, and 204 inside it", async () => {
    const { payload, signature } = await delivery();
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
