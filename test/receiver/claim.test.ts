import { setTimeout as sleep } from "node:timers/promises";
import { runInNewContext } from "node:vm";
import {
  type ClaimResult,
  type DedupeStore,
  MemoryDedupeStore,
  type Telemetry,
  type WebhookError,
} from "flag-webhooks";
import { describe, expect, it, vi } from "vitest";
import {
  body,
  error,
  handler,
  type Options,
  recordingStore,
  recordingTelemetry,
  request,
  seen,
} from "../support/receiver.js";

// The claim: how the receiver uses a DedupeStore around each delivery. It claims the event's id
// for a lease before the handler runs, marks it done only when the handler finished with a 2xx
// answer, and releases it otherwise (while its lease lasts) so the sender's retry runs it. A
// store that fails, answers something that is no ClaimResult, or never answers fails closed:
// 503 store_unavailable, within dedupe.timeout, and never a handler run without dedupe (unless
// failOpen). The stores themselves: test/stores/.

describe("dedupe: what marks an id handled", () => {
  const run = async (reply: unknown, options: Options = {}) => {
    const store = recordingStore();
    const receive = handler({ dedupe: { store, ttl: 3_600_000 }, onEvent: () => reply, ...options });
    const text = body();
    const first = await receive(await request(text));
    const second = await receive(await request(text));
    return { first: first.status, second: second.status, duplicate: second.headers.get("webhook-duplicate"), store };
  };

  it.each([200, 204, 299])("a %i reply marks the id done: a copy is a duplicate", async (status) => {
    const result = await run(status === 204 ? undefined : { status });
    expect(result).toMatchObject({ first: status, second: 204, duplicate: "true" });
    expect(result.store.calls).toEqual(["claim 60000", "complete 3600000", "claim 60000"]);
  });

  it.each([300, 404, 503])("a %i reply releases the claim: a copy runs again", async (status) => {
    const result = await run({ status });
    expect(result).toMatchObject({ first: status, second: status, duplicate: null });
    expect(result.store.calls).toEqual(["claim 60000", "release", "claim 60000", "release"]);
  });

  it("a Response of 2xx marks it done, one of 5xx releases it", async () => {
    expect(await run(new Response(null, { status: 201 }))).toMatchObject({ first: 201, duplicate: "true" });
    expect(await run(new Response(null, { status: 500 }))).toMatchObject({ first: 500, second: 500 });
  });

  it("passes the lease and ttl given as durations", async () => {
    const store = recordingStore();
    await handler({ dedupe: { store, ttl: "2h", inFlightTtl: "90s" } })(await request());
    expect(store.calls).toEqual(["claim 90000", "complete 7200000"]);
  });

  it("runs the handler without dedupe when the store is down and failOpen is true, and only then", async () => {
    const store = { ...recordingStore(), claim: () => Promise.reject(new Error("down")) };
    const ran: string[] = [];
    const onEvent = (event: { id: string }) => void ran.push(event.id);
    const open = await handler({ dedupe: { store, ttl: "1h", failOpen: true }, onEvent: onEvent as never })(
      await request(),
    );
    expect(open.status).toBe(204);
    expect(ran).toHaveLength(1);
    const shut = await handler({ dedupe: { store, ttl: "1h", failOpen: "yes" as never }, onEvent: onEvent as never })(
      await request(),
    );
    expect(shut.status).toBe(503);
    expect(ran).toHaveLength(1);
  });

  /** A store whose claims answer only when the test calls `land`, and that writes down each release. */
  const lateClaims = () => {
    const released: string[] = [];
    let landed: (result: string) => void = () => {};
    const store = {
      claim: () =>
        new Promise<string>((resolve) => {
          landed = resolve;
        }),
      complete: () => {},
      release: (id: string) => void released.push(id),
    };
    return { store, land: (result: string) => landed(result), released };
  };

  it("a store that never answers a claim gets 503 after dedupe.timeout, and a claim landing late is released", async () => {
    const { store, land, released } = lateClaims();
    const errors: unknown[] = [];
    const answer = await handler({
      dedupe: { store: store as never, ttl: "1h", timeout: 30 },
      onError: (e) => void errors.push(e),
    })(await request(body("evt_late")));
    expect(answer.status).toBe(503);
    expect(errors).toEqual([new Error("the dedupe store did not answer within 30 ms")]);
    land("claimed");
    await vi.waitFor(() => expect(released).toEqual(["evt_late"]));
  });

  it("a claim landing late that did not claim is left alone", async () => {
    const { store, land, released } = lateClaims();
    const answer = await handler({ dedupe: { store: store as never, ttl: "1h", timeout: 30 } })(await request());
    expect(answer.status).toBe(503);
    land("in_flight");
    await sleep(20);
    expect(released).toEqual([]);
  });

  it("takes any thenable from a store, not only a native Promise", async () => {
    const memory = new MemoryDedupeStore();
    // biome-ignore lint/suspicious/noThenProperty: a thenable that is no Promise is the point here.
    const thenable = <T>(value: T) => ({ then: (resolve: (v: T) => void) => resolve(value) });
    const store = {
      claim: (id: string, lease: number) => thenable(memory.claim(id, lease)),
      complete: (id: string, ttl: number) => thenable(memory.complete(id, ttl)),
      release: (id: string) => thenable(memory.release(id)),
    };
    const receive = handler({ dedupe: { store: store as never, ttl: "1h" } });
    const text = body();
    expect((await receive(await request(text))).status).toBe(204);
    expect((await receive(await request(text))).headers.get("webhook-duplicate")).toBe("true");
  });

  it("takes a thenable that is a function, as Promise.resolve does", async () => {
    const memory = new MemoryDedupeStore();
    const callable = <T>(value: T) =>
      // biome-ignore lint/suspicious/noThenProperty: a callable thenable is the point here.
      Object.assign(() => {}, { then: (resolve: (v: T) => void) => resolve(value) });
    const store = {
      claim: (id: string, lease: number) => callable(memory.claim(id, lease)),
      complete: (id: string, ttl: number) => callable(memory.complete(id, ttl)),
      release: (id: string) => callable(memory.release(id)),
    };
    const errors: unknown[] = [];
    const receive = handler({ dedupe: { store: store as never, ttl: "1h" }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(await request(text))).status).toBe(204);
    expect((await receive(await request(text))).headers.get("webhook-duplicate")).toBe("true");
    expect(errors).toEqual([]);
  });

  it("gives a store that answers slowly the whole dedupe.timeout to mark an id done", async () => {
    const memory = new MemoryDedupeStore();
    const calls: string[] = [];
    const store = {
      ...recordingStore(memory),
      complete: async (id: string, ttl: number) => {
        calls.push("complete");
        await sleep(20);
        return memory.complete(id, ttl);
      },
    };
    const errors: unknown[] = [];
    const receive = handler({ dedupe: { store, ttl: "1h", timeout: 5000 }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(await request(text))).status).toBe(204);
    expect((await receive(await request(text))).headers.get("webhook-duplicate")).toBe("true");
    expect([calls, errors]).toEqual([["complete"], []]);
  });

  it("retries marking an id done when the store fails once, so a copy is still a duplicate", async () => {
    const memory = new MemoryDedupeStore();
    let failures = 1;
    const errors: unknown[] = [];
    const store = {
      ...recordingStore(memory),
      complete: (id: string, ttl: number) => {
        if (failures-- > 0) return Promise.reject(new Error("READONLY"));
        return memory.complete(id, ttl);
      },
    };
    const receive = handler({ dedupe: { store, ttl: "1h", timeout: 1000 }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(await request(text))).status).toBe(204);
    expect((await receive(await request(text))).headers.get("webhook-duplicate")).toBe("true");
    expect(errors).toEqual([]);
  });

  it.each([
    // 25 ms, doubled each time up to 250 ms, while the pause still fits in dedupe.timeout.
    [1000, [0, 25, 75, 175, 375, 625, 875]],
    // A pause that would end exactly at the deadline is not taken.
    [625, [0, 25, 75, 175, 375]],
  ])("backs off between attempts to mark an id done: within %i ms, attempts at %j ms", async (timeout, times) => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const attempts: number[] = [];
      const began = performance.now();
      const store = {
        ...recordingStore(),
        complete: () => {
          attempts.push(performance.now() - began);
          return Promise.reject(new Error("READONLY"));
        },
      };
      const errors: unknown[] = [];
      const answer = handler({ dedupe: { store, ttl: "1h", timeout }, onError: (e) => void errors.push(e) })(
        await request(),
      );
      await vi.advanceTimersByTimeAsync(timeout + 500);
      expect((await answer).status).toBe(204);
      expect(attempts).toEqual(times);
      expect(errors).toEqual([new Error("READONLY")]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports a store that keeps failing to mark an id done, and still answers 204", async () => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), complete: () => Promise.reject(new Error("READONLY")) };
    const answer = await handler({ dedupe: { store, ttl: "1h", timeout: 60 }, onError: (e) => void errors.push(e) })(
      await request(),
    );
    expect(answer.status).toBe(204);
    expect(errors).toEqual([new Error("READONLY")]);
  });

  it("does not release a claim whose lease ran out while the handler failed: another copy may hold it", async () => {
    const store = recordingStore();
    const answer = await handler({
      dedupe: { store, ttl: "1h", inFlightTtl: 20 },
      onEvent: async () => {
        await sleep(40);
        throw new Error("slow and failed");
      },
    })(await request());
    expect(answer.status).toBe(500);
    expect(store.calls).toEqual(["claim 20"]);
  });

  it("releases a claim when a handler fails within its lease", async () => {
    const store = recordingStore();
    const answer = await handler({
      dedupe: { store, ttl: "1h" },
      onEvent: () => {
        throw new Error("failed");
      },
    })(await request());
    expect(answer.status).toBe(500);
    expect(store.calls).toEqual(["claim 60000", "release"]);
  });

  it("reports a release that fails and still answers the handler's failure", async () => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), release: () => Promise.reject(new Error("gone")) };
    const answer = await handler({
      dedupe: { store, ttl: "1h" },
      onEvent: () => ({ status: 503 }),
      onError: (e) => void errors.push(e),
    })(await request());
    expect(answer.status).toBe(503);
    expect(errors).toEqual([new Error("gone")]);
  });

  it("waits dedupe.timeout for a release that never answers, then reports it and answers", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const errors: unknown[] = [];
      const store = { ...recordingStore(), release: () => new Promise<void>(() => {}) };
      let status: number | undefined;
      const answer = handler({
        dedupe: { store, ttl: "1h", timeout: 300 },
        onEvent: () => ({ status: 503 }),
        onError: (e) => void errors.push(e),
      })(await request()).then((response) => {
        status = response.status;
      });
      await vi.advanceTimersByTimeAsync(299);
      expect(status).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      await answer;
      expect(status).toBe(503);
      expect(errors).toEqual([new Error("the dedupe store did not answer within 300 ms")]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("releases a claim when a handler fails within a short lease", async () => {
    const store = recordingStore();
    await handler({ dedupe: { store, ttl: "1h", inFlightTtl: "2s" }, onEvent: () => ({ status: 500 }) })(
      await request(),
    );
    expect(store.calls).toEqual(["claim 2000", "release"]);
  });
});

describe("a store that fails, answers something else, or answers late", () => {
  it("store_unavailable carries the store's error as its cause", async () => {
    const rejected: WebhookError[] = [];
    const broken = new Error("ECONNRESET");
    const store = { ...recordingStore(), claim: () => Promise.reject(broken) };
    await handler({ dedupe: { store, ttl: "1h" }, onRejected: (e) => void rejected.push(e) })(await request());
    expect(rejected.map((e) => [e.code, e.cause])).toEqual([["store_unavailable", broken]]);
  });

  it.each<[unknown, string]>([
    ["yes", '"yes"'],
    [42, "42"],
    [null, "null"],
    [undefined, "undefined"],
    ["claimed ", '"claimed "'],
    [false, "false"],
    ["DONE", '"DONE"'],
  ])(
    "a claim() answering %j is a store failure, not a claim: every copy is answered 503, the handler never runs, and each is reported",
    async (value, shown) => {
      // Taken for a claim, such an answer would turn dedupe off without a word: every copy would run.
      let runs = 0;
      const errors: unknown[] = [];
      const store = { ...recordingStore(), claim: () => value as never };
      const receive = handler({
        dedupe: { store, ttl: "1h" },
        onEvent: () => void runs++,
        onError: (e) => void errors.push(e),
      });
      const text = body();
      const answers = [(await receive(await request(text))).status, (await receive(await request(text))).status];
      expect([answers, runs]).toEqual([[503, 503], 0]);
      const reported = new TypeError(
        `flag-webhooks: the dedupe store's claim() answered ${shown}, not "claimed", "in_flight" or "done"`,
      );
      expect(errors).toEqual([reported, reported]);
    },
  );

  it("a claim() answering an object is named as text", async () => {
    const errors: unknown[] = [];
    const store = { ...recordingStore(), claim: () => ({ state: "claimed" }) as never };
    await handler({ dedupe: { store, ttl: "1h" }, onError: (e) => void errors.push(e) })(await request());
    expect(errors).toEqual([
      new TypeError(
        `flag-webhooks: the dedupe store's claim() answered [object Object], not "claimed", "in_flight" or "done"`,
      ),
    ]);
  });

  it("a store that answers complete() after the timeout is reported once, and its late answer ignored", async () => {
    const errors: unknown[] = [];
    const memory = new MemoryDedupeStore();
    const store = {
      ...recordingStore(memory),
      complete: (id: string, ttl: number) => sleep(120).then(() => memory.complete(id, ttl)),
    };
    const answer = await handler({ dedupe: { store, ttl: "1h", timeout: 30 }, onError: (e) => void errors.push(e) })(
      await request(),
    );
    expect(answer.status).toBe(204);
    await sleep(150); // the late answers arrive, and must throw nowhere
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toMatch(/^the dedupe store did not answer within [\d.]+ ms$/);
  });
});

describe("a store that never answers, in any form, is bounded by dedupe.timeout", () => {
  const never = {
    // biome-ignore lint/suspicious/noThenProperty: a store's own thenable is what this case is about.
    "a plain thenable": () => ({ then() {} }),
    "a Promise of another realm": () => runInNewContext("new Promise(() => {})") as Promise<ClaimResult>,
    "a native Promise": () => new Promise<ClaimResult>(() => {}),
  };
  it.each(Object.entries(never))("%s: the delivery is answered 503 store_unavailable", async (_name, pending) => {
    const store: DedupeStore = { claim: pending as () => Promise<ClaimResult>, complete() {}, release() {} };
    const onEvent = vi.fn();
    const receive = handler({ dedupe: { store, ttl: 60_000, timeout: 100 }, onEvent });
    const response = await receive(await request());
    expect(response.status).toBe(503);
    expect((await response.json()).error.code).toBe("store_unavailable");
    expect(onEvent).not.toHaveBeenCalled();
  });

  it("a thenable whose then throws is a store failure too", async () => {
    const store: DedupeStore = {
      claim: () =>
        ({
          // biome-ignore lint/suspicious/noThenProperty: a store's own thenable is what this case is about.
          then() {
            throw new Error("broken thenable");
          },
        }) as unknown as Promise<ClaimResult>,
      complete() {},
      release() {},
    };
    expect((await handler({ dedupe: { store, ttl: 60_000 } })(await request())).status).toBe(503);
  });
});

describe("the claim, as the sender and the delivery's record see it", () => {
  it("a store whose claim() throws at once is down: 503 store_unavailable, the handler never runs", async () => {
    let runs = 0;
    const errors: unknown[] = [];
    const thrown = new Error("not connected");
    const store = {
      ...recordingStore(),
      claim: () => {
        throw thrown;
      },
    };
    const answer = await handler({
      dedupe: { store, ttl: "1h" },
      onEvent: () => void runs++,
      onError: (e) => void errors.push(e),
    })(await request());
    expect([answer.status, runs, errors]).toEqual([503, 0, [thrown]]);
  });

  it("409 and 503 say why, naming the event a copy waits for", async () => {
    const busy = { ...recordingStore(), claim: () => "in_flight" as const };
    const inProgress = await handler({ dedupe: { store: busy, ttl: "1h" } })(await request(body("evt_busy_42")));
    expect(await seen(inProgress)).toMatchObject({
      status: 409,
      body: error("delivery_in_progress", "event evt_busy_42 is being handled by another delivery; retry later"),
    });
    const down = { ...recordingStore(), claim: () => Promise.reject(new Error("down")) };
    const unavailable = await handler({ dedupe: { store: down, ttl: "1h" } })(await request());
    expect(await seen(unavailable)).toMatchObject({
      status: 503,
      body: error("store_unavailable", "the dedupe store is unavailable; retry later"),
    });
  });

  it("a complete() that throws at once is retried like one that rejects: a copy is still a duplicate", async () => {
    const errors: unknown[] = [];
    const memory = new MemoryDedupeStore();
    let failures = 1;
    const store = {
      ...recordingStore(memory),
      complete(id: string, ttl: number) {
        if (failures-- > 0) throw new Error("READONLY");
        return memory.complete(id, ttl);
      },
    };
    const receive = handler({ dedupe: { store, ttl: "1h" }, onError: (e) => void errors.push(e) });
    const text = body();
    expect((await receive(await request(text))).status).toBe(204);
    const copy = await receive(await request(text));
    expect([copy.status, copy.headers.get("webhook-duplicate"), errors]).toEqual([204, "true", []]);
  });

  it("the record hears each store call by name, timed in seconds", async () => {
    const calls: [string, number][] = [];
    const telemetry: Telemetry = {
      delivery: () => ({
        verified() {},
        store: (operation, seconds) => void calls.push([operation, seconds]),
        run: (fn) => fn(),
        handler() {},
        end() {},
      }),
    };
    const memory = new MemoryDedupeStore();
    // Each call waits 30 ms: a duration in milliseconds, or a difference taken the wrong way, shows.
    const slow = <T>(value: T) => sleep(30).then(() => value);
    const store: DedupeStore = {
      claim: (id, lease) => slow(memory.claim(id, lease)),
      complete: (id, ttl) => slow(memory.complete(id, ttl)),
      release: (id) => slow(memory.release(id)),
    };
    const receive = handler({ telemetry, dedupe: { store, ttl: "1h" } });
    await receive(await request());
    await handler({ telemetry, dedupe: { store, ttl: "1h" }, onEvent: () => ({ status: 500 }) })(await request());
    expect(calls.map(([operation]) => operation)).toEqual(["claim", "complete", "claim", "release"]);
    for (const [, seconds] of calls) expect(seconds).toBeGreaterThanOrEqual(0.025);
    for (const [, seconds] of calls) expect(seconds).toBeLessThan(30);
  });

  it("the record hears the claim and the complete of a store that answers at once (the memory store)", async () => {
    const { log, telemetry } = recordingTelemetry();
    await handler({ telemetry, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } })(await request());
    expect(log).toEqual(["verified", "store claim", "handler", "store complete", "end handled 204"]);
  });
});
