import { MemoryDedupeStore, RedisDedupeStore } from "flag-webhooks";
import { type EventQueue, enqueueTo } from "flag-webhooks/bullmq";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { type WebhookHandlerOptions, webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it } from "vitest";
import { recordingStore, SECRET } from "../support/receiver.js";

// The receiver's options, checked when it is made (a configuration mistake fails loudly at start,
// not as a 500 on the first delivery): each message names the option and the value it got.
// Durations a timer waits are bounded by the longest a timer can wait (2^31-1 ms).

const secret = SECRET;

describe("options, checked when the handler is created", () => {
  const make = (options: unknown) => () => webhookHandler(options as WebhookHandlerOptions);

  it("needs an options object", () => {
    for (const options of [undefined, null, "secret"]) {
      expect(make(options)).toThrow(new TypeError('flag-webhooks: options with a "secret" are required'));
    }
  });

  it("says how to avoid a missing secret when next build evaluates the module, and only then", () => {
    const plain = 'flag-webhooks: option "secret" must be a non-empty string, or a list of them to verify';
    const phase = process.env.NEXT_PHASE;
    try {
      for (const value of ["", undefined, []]) {
        delete process.env.NEXT_PHASE;
        expect(make({ secret: value, onEvent: () => {} })).toThrow(new TypeError(plain));
        process.env.NEXT_PHASE = "phase-production-server";
        expect(make({ secret: value, onEvent: () => {} })).toThrow(new TypeError(plain));
        process.env.NEXT_PHASE = "phase-production-build";
        expect(make({ secret: value, onEvent: () => {} })).toThrow(
          new TypeError(
            `${plain}. "next build" is evaluating this module, without the deployment's secrets: make the handler on the first request instead (flag-webhooks docs/hosts.md, Next.js)`,
          ),
        );
        expect(() => expressMiddleware({ secret: value } as never)).toThrow(/"next build" is evaluating this module/);
      }
      // A secret that is there is never refused, build or not.
      expect(make({ secret, onEvent: () => {} })).not.toThrow();
    } finally {
      if (phase === undefined) delete process.env.NEXT_PHASE;
      else process.env.NEXT_PHASE = phase;
    }
  });

  it.each(["onError", "onVerified", "onRejected", "now"])("names %s when it is not a function", (name) => {
    expect(make({ secret, onEvent: () => {}, [name]: "nope" })).toThrow(
      new TypeError(`flag-webhooks: option "${name}" must be a function`),
    );
  });

  it.each([{}, null, { delivery: "x" }])("refuses telemetry %j", (telemetry) => {
    expect(make({ secret, onEvent: () => {}, telemetry })).toThrow(
      new TypeError('flag-webhooks: option "telemetry" must be a Telemetry, such as openTelemetry()'),
    );
  });

  it("refuses a dedupe store without claim, complete and release", () => {
    const full = new MemoryDedupeStore();
    for (const store of [
      undefined,
      {},
      { ...recordingStore(full), claim: undefined },
      { ...recordingStore(full), complete: "x" },
      { ...recordingStore(full), release: null },
    ]) {
      expect(make({ secret, onEvent: () => {}, dedupe: { store, ttl: 1000 } })).toThrow(
        new TypeError('flag-webhooks: option "dedupe.store" must be a DedupeStore (claim, complete, release)'),
      );
    }
    expect(make({ secret, onEvent: () => {}, dedupe: undefined })).not.toThrow();
  });

  it("requires dedupe.ttl, at least maxAge plus twice the minute of clock skew allowed (shorter, a replay gap), and any ttl without maxAge", () => {
    const store = new MemoryDedupeStore();
    expect(make({ secret, onEvent: () => {}, dedupe: { store } })).toThrow(
      new TypeError('flag-webhooks: option "dedupe.ttl" is required'),
    );
    expect(make({ secret, onEvent: () => {}, maxAge: "5m", dedupe: { store, ttl: 420_000 } })).not.toThrow();
    expect(make({ secret, onEvent: () => {}, maxAge: "5m", dedupe: { store, ttl: "7m" } })).not.toThrow();
    expect(make({ secret, onEvent: () => {}, maxAge: "5m", dedupe: { store, ttl: 419_999 } })).toThrow(
      new TypeError(
        'flag-webhooks: option "dedupe.ttl" (419999 ms) is shorter than maxAge plus twice the 60 s clock-skew allowance ' +
          "(420000 ms): a captured delivery could be replayed after its id is forgotten, by a receiver whose clock is " +
          "behind the one that handled it; make it at least that long",
      ),
    );
    expect(make({ secret, onEvent: () => {}, maxAge: "5m", dedupe: { store, ttl: "6m" } })).toThrow(
      /option "dedupe\.ttl" \(360000 ms\) is shorter than maxAge plus twice the 60 s clock-skew allowance \(420000 ms\)/,
    );
    // Without a replay window, a copy older than the ttl is refused by nothing else anyway.
    expect(make({ secret, onEvent: () => {}, dedupe: { store, ttl: "1m" } })).not.toThrow();
  });

  it.each([
    ["dedupe.inFlightTtl", { inFlightTtl: "soon" }, "soon"],
    ["dedupe.timeout", { timeout: -1 }, -1],
    ["dedupe.ttl", { ttl: "forever" }, "forever"],
  ])("names %s when it is no duration", (name, extra, value) => {
    const dedupe = { store: new MemoryDedupeStore(), ttl: "1h", ...extra };
    expect(make({ secret, onEvent: () => {}, dedupe })).toThrow(
      new TypeError(
        `flag-webhooks: option "${name}" must be a positive number of milliseconds or a duration such as "5m", got ${JSON.stringify(value)}`,
      ),
    );
  });

  it("names maxAge when it is no duration, and takes dedupe: null as a mistake, not as no dedupe", () => {
    expect(make({ secret, onEvent: () => {}, maxAge: "a while" })).toThrow(
      new TypeError(
        'flag-webhooks: option "maxAge" must be a positive number of milliseconds or a duration such as "5m", got "a while"',
      ),
    );
    expect(make({ secret, onEvent: () => {}, dedupe: null })).toThrow(
      new TypeError('flag-webhooks: option "dedupe.store" must be a DedupeStore (claim, complete, release)'),
    );
  });

  it("names bodyTimeout when it is no duration", () => {
    expect(make({ secret, onEvent: () => {}, bodyTimeout: "later" })).toThrow(
      /option "bodyTimeout" must be a positive/,
    );
  });
});

describe("durations a timer waits", () => {
  const TIMER_MAX = 2 ** 31 - 1;
  const tooLong = (option: string, value: unknown) =>
    new TypeError(
      `flag-webhooks: option "${option}" must be at most ${TIMER_MAX} ms (about 24.8 days, the longest a timer can wait), got ${JSON.stringify(value)}`,
    );

  it("takes a bodyTimeout of 2^31-1 ms, and refuses one a millisecond longer or of 25 or 30 days, explaining why, in every adapter", () => {
    expect(() => webhookHandler({ secret, bodyTimeout: TIMER_MAX, onEvent: () => {} })).not.toThrow();
    for (const bodyTimeout of [TIMER_MAX + 1, "25d", "30d"]) {
      expect(() => webhookHandler({ secret, bodyTimeout, onEvent: () => {} })).toThrow(
        tooLong("bodyTimeout", bodyTimeout),
      );
      expect(() => expressMiddleware({ secret, bodyTimeout })).toThrow(tooLong("bodyTimeout", bodyTimeout));
    }
  });

  it("limits dedupe.timeout, RedisDedupeStore's timeout and enqueueTo's timeout the same way", () => {
    const store = new MemoryDedupeStore();
    for (const timeout of ["25d", "30d"]) {
      expect(() => webhookHandler({ secret, dedupe: { store, ttl: "30d", timeout }, onEvent: () => {} })).toThrow(
        tooLong("dedupe.timeout", timeout),
      );
    }
    const client = { call: async () => null };
    expect(() => new RedisDedupeStore(client, { scope: "app", timeout: TIMER_MAX + 1 })).toThrow(
      tooLong("timeout", TIMER_MAX + 1),
    );
    expect(() => new RedisDedupeStore(client, { scope: "app", timeout: "30d" })).toThrow(tooLong("timeout", "30d"));
    expect(() => new RedisDedupeStore(client, { scope: "app", timeout: TIMER_MAX })).not.toThrow();
    const queue = { add: async () => ({}), defaultJobOptions: {} } as unknown as EventQueue;
    expect(() => enqueueTo(queue, { timeout: "30d" })).toThrow(/option "timeout" must be at most 2147483647 ms/);
  });

  it("accepts the longest a timer can wait, and a ttl of 30 days (a ttl is no timer)", () => {
    const store = new MemoryDedupeStore();
    expect(() =>
      expressMiddleware({ secret, bodyTimeout: 2 ** 31 - 1, dedupe: { store, ttl: "30d", timeout: "24d" } }),
    ).not.toThrow();
  });
});
