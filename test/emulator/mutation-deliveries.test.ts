import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator, type Delivery, type Emulator, type EmulatorOptions } from "flag-webhooks/emulator";
import { afterEach, describe, expect, it, vi } from "vitest";
import { call, until } from "../support/emulator.js";

// The emulator's sender in detail, over real HTTP: what each delivery and attempt records, when
// the next attempt is due, how much of an answer is kept, which deliveries a deleted webhook
// stops, what the history forgets, and what happens to deliveries when the emulator closes.

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const task of cleanup.splice(0).reverse()) await task();
});

async function start(options: EmulatorOptions = {}): Promise<Emulator> {
  const emulator = await createEmulator(options);
  cleanup.push(() => emulator.close());
  return emulator;
}

/** A real endpoint; `handle` answers request n (from 1) as it likes, or never. */
async function endpoint(handle: (n: number, res: ServerResponse, req: IncomingMessage) => void) {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    req.resume();
    req.on("end", () => handle(requests.length, res, req));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`, requests };
}

const answer = (status: number) => (_n: number, res: ServerResponse) => {
  res.writeHead(status);
  res.end();
};
const hang = () => {};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function webhook(emulator: Emulator, url: string): Promise<string> {
  const made = await call(emulator, "POST", "/projects/p/webhooks", {
    body: { url, events: ["flag.created"], environments: ["staging"] },
  });
  expect(made.status).toBe(201);
  return made.json.id;
}

async function flag(emulator: Emulator, key: string): Promise<void> {
  expect((await call(emulator, "POST", "/projects/p/flags", { body: { key, type: "boolean" } })).status).toBe(201);
}

describe("what a delivery records", () => {
  it("is an event, sent with the emulator's user-agent; a redelivery gets an id of its own", async () => {
    const app = await endpoint(answer(204));
    const emulator = await start();
    await webhook(emulator, app.url);
    await flag(emulator, "f");
    await emulator.settled();
    const [first] = emulator.deliveries() as [Delivery];
    expect([first.kind, first.state]).toEqual(["event", "succeeded"]);
    expect(app.requests[0]?.headers["user-agent"]).toBe("flag-webhooks-emulator");
    const copy = await call(emulator, "POST", `/_emulator/deliveries/${first.id}/redeliver`);
    expect(copy.json.id).toMatch(/^dlv_[0-9a-f]{16}$/);
    expect([copy.json.kind, copy.json.of]).toEqual(["redelivery", first.id]);
    expect(copy.json.id).not.toBe(first.id);
  });

  it("records a 204 with an empty body and no error, and counts a 300 as a failure", async () => {
    const app = await endpoint((n, res) => answer(n === 1 ? 204 : 300)(n, res));
    const emulator = await start({ retry: { attempts: 1 } });
    await webhook(emulator, app.url);
    await flag(emulator, "ok");
    await emulator.settled();
    await flag(emulator, "moved");
    await emulator.settled();
    const [ok, moved] = emulator.deliveries() as [Delivery, Delivery];
    expect(ok.state).toBe("succeeded");
    expect(ok.attempts[0]).toMatchObject({ number: 1, status: 204, responseBody: "" });
    expect(ok.attempts[0]?.error).toBeUndefined();
    expect([moved.state, moved.attempts.map((a) => a.status)]).toEqual(["failed", [300]]);
  });

  it("keeps the first 16 KiB of an endless answer, without waiting for its end", async () => {
    const app = await endpoint((_n, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("x".repeat(20 * 1024));
      // and never ends
    });
    const emulator = await start({ retry: { attempts: 1, timeoutMs: 2000 } });
    await webhook(emulator, app.url);
    await flag(emulator, "long");
    await emulator.settled();
    const attempt = emulator.deliveries()[0]?.attempts[0];
    expect(attempt?.error).toBeUndefined();
    expect([attempt?.status, attempt?.responseBody?.length]).toEqual([200, 16 * 1024]);
  });

  it("measures an attempt's duration in milliseconds, to a tenth", async () => {
    const app = await endpoint((n, res) => setTimeout(() => answer(204)(n, res), 40));
    const emulator = await start();
    await webhook(emulator, app.url);
    const before = performance.now();
    await flag(emulator, "slow");
    await emulator.settled();
    const took = performance.now() - before;
    const duration = emulator.deliveries()[0]?.attempts[0]?.durationMs as number;
    // The endpoint waited 40 ms before answering; the whole exchange took `took`.
    expect(duration).toBeGreaterThanOrEqual(35);
    expect(duration).toBeLessThanOrEqual(took);
    expect(Number(duration.toFixed(1))).toBe(duration);
  });

  it("clears the attempt's timeout once the answer is in", async () => {
    const app = await endpoint(answer(204));
    const emulator = await start({ retry: { timeoutMs: 4321 } });
    await webhook(emulator, app.url);
    const set = vi.spyOn(globalThis, "setTimeout");
    const clear = vi.spyOn(globalThis, "clearTimeout");
    try {
      await flag(emulator, "t");
      await emulator.settled();
      const index = set.mock.calls.findIndex((args) => args[1] === 4321);
      expect(index).toBeGreaterThanOrEqual(0);
      expect(clear).toHaveBeenCalledWith(set.mock.results[index]?.value);
    } finally {
      set.mockRestore();
      clear.mockRestore();
    }
  });
});

describe("retries", () => {
  it("schedules the second attempt initialDelayMs after the first failed", async () => {
    const clock = new Date("2026-03-01T00:00:00.000Z");
    const app = await endpoint(answer(500));
    const emulator = await start({
      now: () => clock,
      retry: { initialDelayMs: 60_000, maxDelayMs: 600_000, attempts: 3 },
    });
    await webhook(emulator, app.url);
    await flag(emulator, "f");
    const delivery = await until(() => emulator.deliveries().find((d) => d.attempts.length === 1));
    expect(delivery.nextAttemptAt).toBe("2026-03-01T00:01:00.000Z");
  });

  it("settled() waits for an attempt on the wire", async () => {
    const app = await endpoint((n, res) => setTimeout(() => answer(204)(n, res), 100));
    const emulator = await start();
    await webhook(emulator, app.url);
    await flag(emulator, "f");
    await emulator.settled();
    expect(emulator.deliveries().map((d) => d.state)).toEqual(["succeeded"]);
  });
});

describe("deleting a webhook", () => {
  it("cancels its pending deliveries only: not its finished ones, not another webhook's", async () => {
    const app = await endpoint((n, res) => (n === 1 ? answer(204)(n, res) : hang()));
    const emulator = await start({ retry: { attempts: 1 } });
    const deleted = await webhook(emulator, app.url);
    await flag(emulator, "one");
    await emulator.settled();
    const kept = await webhook(emulator, app.url);
    await flag(emulator, "two");
    await until(() => app.requests.length === 3);
    expect((await call(emulator, "DELETE", `/projects/p/webhooks/${deleted}`)).status).toBe(204);
    const states = emulator.deliveries().map((d) => [d.webhookId === deleted ? "deleted" : "kept", d.state]);
    expect(states.sort()).toEqual([
      ["deleted", "cancelled"],
      ["deleted", "succeeded"],
      ["kept", "pending"],
    ]);
    expect(kept).not.toBe(deleted);
  });
});

describe("the history's bound", () => {
  it("forgets the oldest finished deliveries beyond maxDeliveries, one for one", async () => {
    const app = await endpoint(answer(204));
    const emulator = await start({ maxDeliveries: 2 });
    await webhook(emulator, app.url);
    for (const key of ["a", "b", "c"]) {
      await flag(emulator, key);
      await emulator.settled();
    }
    const flags = emulator.deliveries().map((d) => JSON.parse(d.request.body).data.flag);
    expect(flags).toEqual(["b", "c"]);
  });

  it("never forgets a pending delivery, even beyond the bound", async () => {
    const app = await endpoint(hang);
    const emulator = await start({ maxDeliveries: 1, retry: { attempts: 1 } });
    await webhook(emulator, app.url);
    await flag(emulator, "a");
    await flag(emulator, "b");
    await until(() => app.requests.length === 2);
    expect(emulator.deliveries().map((d) => d.state)).toEqual(["pending", "pending"]);
  });
});

describe("a restored history", () => {
  it("leaves finished deliveries as they were: not pending, never scheduled", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emulator-deliveries-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const stateFile = join(dir, "state.json");
    const failed: Delivery = {
      id: "dlv_00000000000000aa",
      kind: "event",
      project: "p",
      webhookId: "wh_1",
      url: "http://127.0.0.1:9/webhooks",
      event: { id: "evt_1", type: "flag.created", environment: "staging" },
      createdAt: "2026-03-01T00:00:00.000Z",
      request: { headers: { "content-type": "application/json" }, body: "{}" },
      attempts: [{ number: 1, startedAt: "2026-03-01T00:00:00.000Z", durationMs: 1.5, error: "ECONNREFUSED" }],
      state: "failed",
    };
    writeFileSync(
      stateFile,
      JSON.stringify({ version: 1, token: "state-token-1", seq: 0, projects: [], deliveries: [failed] }),
    );
    const emulator = await start({ stateFile });
    const settled = await Promise.race([emulator.settled().then(() => "settled"), sleep(1000).then(() => "waiting")]);
    expect(settled).toBe("settled");
    await sleep(20);
    expect(emulator.deliveries()).toEqual([failed]);
  });
});

describe("closing", () => {
  it("drops the attempt on the wire: the delivery stays pending without it, and nothing is sent again", async () => {
    const app = await endpoint(hang);
    const emulator = await createEmulator({ retry: { initialDelayMs: 10 } });
    await webhook(emulator, app.url);
    await flag(emulator, "f");
    await until(() => app.requests.length === 1);
    await emulator.close();
    await sleep(100);
    expect(emulator.deliveries().map((d) => [d.state, d.attempts.length])).toEqual([["pending", 0]]);
    expect(app.requests.length).toBe(1);
  });

  it("sends nothing for a delivery made as the emulator closes", async () => {
    const app = await endpoint(answer(204));
    let closing: Promise<void> | undefined;
    const emulator: Emulator = await createEmulator({
      onDelivery: () => {
        closing ??= emulator.close();
      },
    });
    await webhook(emulator, app.url);
    await call(emulator, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } }).catch(() => undefined);
    await until(() => closing);
    await closing;
    await sleep(100);
    expect(app.requests.length).toBe(0);
    expect(emulator.deliveries().map((d) => [d.state, d.attempts.length])).toEqual([["pending", 0]]);
  });
});
