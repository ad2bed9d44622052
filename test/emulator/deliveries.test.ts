import { readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { SIGNATURE_HEADER, verifyEvent, verifySignature } from "flag-webhooks";
import { createEmulator, type Delivery, type Emulator, type EmulatorOptions } from "flag-webhooks/emulator";
import { describe, expect, it, vi } from "vitest";
import { cleanupAfterEach, tempDir as makeTempDir } from "../support/cleanup.js";
import { call, type Received, receiver, startEmulator, until } from "../support/emulator.js";

// Section 6 of the interface document: every change becomes a signed POST to every webhook
// subscribed to its type and environment; plus the emulator's retry policy and its own endpoints.
// Then the sender in detail: what each delivery and attempt records, when the next attempt is
// due, how much of an answer is kept, which deliveries a deleted webhook stops, what the history
// forgets, and what happens to deliveries when the emulator closes.

const cleanup = cleanupAfterEach();

async function setup(
  options: EmulatorOptions = {},
  answer?: (n: number, req: Received) => number | "hang",
  webhook: { events?: string[]; environments?: string[] } = {},
) {
  const app = await receiver(answer);
  cleanup(app.close);
  const emulator = await createEmulator({ retry: { initialDelayMs: 20, attempts: 3, timeoutMs: 2000 }, ...options });
  cleanup(() => emulator.close());
  const created = await call(emulator, "POST", "/projects/shop/webhooks", {
    body: {
      url: app.url,
      events: webhook.events ?? [
        "flag.created",
        "flag.updated",
        "flag.deleted",
        "rollout.step",
        "rollout.guard_triggered",
      ],
      ...(webhook.environments ? { environments: webhook.environments } : {}),
    },
  });
  expect(created.status).toBe(201);
  return { app, emulator, webhook: created.json as { id: string; secret: string } };
}

const api = (emulator: Emulator, method: string, path: string, body?: unknown) =>
  call(emulator, method, `/projects/shop${path}`, { body });

const events = (requests: Received[]) => requests.map((r) => JSON.parse(r.body));

describe("deliveries (spec section 6)", () => {
  it("sends flag.created once per environment, signed with the webhook's secret", async () => {
    const { app, emulator, webhook } = await setup();
    await api(emulator, "POST", "/flags", { key: "new-checkout", type: "boolean" });
    await emulator.settled();
    expect(app.requests.length).toBe(3);
    const sent = events(app.requests);
    expect(sent.map((e) => [e.type, e.environment])).toEqual([
      ["flag.created", "production"],
      ["flag.created", "staging"],
      ["flag.created", "development"],
    ]);
    for (const request of app.requests) {
      expect(request.headers["content-type"]).toBe("application/json");
      const signature = request.headers[SIGNATURE_HEADER];
      expect(signature).toMatch(/^[0-9a-f]{64}$/);
      expect(await verifySignature({ secret: webhook.secret, payload: request.body, signature })).toBe(true);
      expect(await verifySignature({ secret: "another-secret", payload: request.body, signature })).toBe(false);
      const event = await verifyEvent({ secret: webhook.secret, payload: request.body, signature });
      expect(event.type).toBe("flag.created");
      expect(Object.keys(event).sort()).toEqual(["createdAt", "data", "environment", "id", "type"]);
      expect(event.data).toEqual({ flag: "new-checkout", actor: { type: "user", email: "developer@example.com" } });
    }
    expect(new Set(sent.map((e) => e.id)).size).toBe(3);
  });

  it("sends flag.updated with data.flag, data.changes from → to and data.actor", async () => {
    const { app, emulator, webhook } = await setup(
      { actor: { type: "user", email: "dana@example.com" }, now: () => new Date("2026-03-01T10:00:00.000Z") },
      undefined,
      { events: ["flag.updated"] },
    );
    await api(emulator, "POST", "/flags", { key: "new-checkout", type: "boolean" });
    await api(emulator, "PATCH", "/flags/new-checkout", { environment: "staging", on: true });
    await api(emulator, "PATCH", "/flags/new-checkout", {
      environment: "staging",
      rollout: { percent: 25 },
      comment: "first step",
    });
    await api(emulator, "PATCH", "/flags/new-checkout", {
      environment: "staging",
      on: false,
      rollout: { percent: 50 },
    });
    await emulator.settled();
    const sent = await Promise.all(
      app.requests.map((r) =>
        verifyEvent({ secret: webhook.secret, payload: r.body, signature: r.headers[SIGNATURE_HEADER] }),
      ),
    );
    const data = sent.map((event) => {
      if (event.type !== "flag.updated") throw new Error(`unexpected ${event.type}`);
      expect([event.environment, event.createdAt]).toEqual(["staging", "2026-03-01T10:00:00.000Z"]);
      expect(event.data.actor).toEqual({ type: "user", email: "dana@example.com" });
      return event.data;
    });
    expect(data.map((d) => d.changes)).toEqual([
      [{ path: "on", from: false, to: true }],
      [{ path: "rollout.percent", from: null, to: 25 }],
      [
        { path: "on", from: true, to: false },
        { path: "rollout.percent", from: 25, to: 50 },
      ],
    ]);
    expect(data.map((d) => d.flag)).toEqual(["new-checkout", "new-checkout", "new-checkout"]);
    expect((data[1] as Record<string, unknown> | undefined)?.comment).toBe("first step");
  });

  it("sends nothing for an update that changes nothing, or a refused one", async () => {
    const { app, emulator } = await setup({}, undefined, { events: ["flag.updated"] });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: false });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: "yes" });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await emulator.settled();
    expect(app.requests).toEqual([]);
  });

  it("sends only the subscribed types, only for the webhook's environments", async () => {
    const { app, emulator } = await setup({}, undefined, {
      events: ["flag.updated", "flag.deleted"],
      environments: ["staging"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "production", on: true });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await api(emulator, "DELETE", "/flags/f");
    await emulator.settled();
    expect(events(app.requests).map((e) => [e.type, e.environment])).toEqual([
      ["flag.updated", "staging"],
      ["flag.deleted", "staging"],
    ]);
  });

  it("sends nothing to another project's webhooks", async () => {
    const { app, emulator } = await setup();
    await call(emulator, "POST", "/projects/other/flags", { body: { key: "f", type: "boolean" } });
    await emulator.settled();
    expect(app.requests).toEqual([]);
  });

  it("sends flag.deleted once per environment", async () => {
    const { app, emulator } = await setup({ environments: ["prod", "dev"] }, undefined, { events: ["flag.deleted"] });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "DELETE", "/flags/f");
    await emulator.settled();
    expect(events(app.requests).map((e) => [e.type, e.environment, e.data.flag])).toEqual([
      ["flag.deleted", "prod", "f"],
      ["flag.deleted", "dev", "f"],
    ]);
  });

  it("triggers rollout.step and rollout.guard_triggered through the emulator's own endpoints", async () => {
    const { app, emulator } = await setup({}, undefined, { events: ["rollout.step", "rollout.guard_triggered"] });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    const step = await call(emulator, "POST", "/_emulator/projects/shop/flags/f/rollout-step", {
      body: { environment: "staging", percent: 30 },
    });
    expect([step.status, step.json.environments.staging]).toEqual([200, { on: false, rollout: { percent: 30 } }]);
    await call(emulator, "POST", "/_emulator/projects/shop/flags/f/guard-triggered", {
      body: { environment: "staging", action: "paused" },
    });
    const back = await call(emulator, "POST", "/_emulator/projects/shop/flags/f/guard-triggered", {
      body: { environment: "staging", action: "rolled_back" },
    });
    expect(back.json.environments.staging.rollout).toEqual({ percent: 0 });
    await emulator.settled();
    expect(events(app.requests).map((e) => [e.type, e.environment, e.data])).toEqual([
      ["rollout.step", "staging", { flag: "f", rollout: { from: null, to: 30 } }],
      ["rollout.guard_triggered", "staging", { flag: "f", action: "paused", rollout: { from: 30, to: 30 } }],
      ["rollout.guard_triggered", "staging", { flag: "f", action: "rolled_back", rollout: { from: 30, to: 0 } }],
    ]);
  });

  it("refuses bad input and a missing token on the emulator's own endpoints", async () => {
    const { emulator } = await setup();
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    const path = "/_emulator/projects/shop/flags/f/rollout-step";
    expect(
      (await call(emulator, "POST", path, { body: { environment: "staging", percent: 30 }, token: null })).status,
    ).toBe(401);
    expect(
      (await call(emulator, "POST", path, { body: { environment: "staging", percent: 130 } })).json.error.code,
    ).toBe("invalid_request");
    expect((await call(emulator, "POST", path, { body: { environment: "qa", percent: 1 } })).status).toBe(400);
    const guard = "/_emulator/projects/shop/flags/f/guard-triggered";
    expect((await call(emulator, "POST", guard, { body: { environment: "staging", action: "panic" } })).status).toBe(
      400,
    );
    expect(
      (await call(emulator, "POST", "/_emulator/projects/shop/flags/nope/rollout-step", { body: {} })).status,
    ).toBe(404);
    expect((await call(emulator, "GET", "/_emulator/events", { token: null })).status).toBe(401);
  });
});

describe("the emulator's retry policy", () => {
  const attemptsOf = (emulator: Emulator) =>
    emulator.deliveries().map((d) => d.attempts.map((a) => a.status ?? a.error));

  it("retries a non-2xx answer with exponential backoff, the same bytes and signature each time", async () => {
    const { app, emulator } = await setup({ retry: { initialDelayMs: 40, attempts: 5 } }, (n) => (n <= 2 ? 500 : 200), {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await emulator.settled();
    expect(app.requests.length).toBe(3);
    expect(new Set(app.requests.map((r) => r.body)).size).toBe(1);
    expect(new Set(app.requests.map((r) => r.headers[SIGNATURE_HEADER])).size).toBe(1);
    const [delivery] = emulator.deliveries();
    expect(delivery?.state).toBe("succeeded");
    expect(delivery?.attempts.map((a) => [a.number, a.status, a.responseBody])).toEqual([
      [1, 500, "answer 1"],
      [2, 500, "answer 2"],
      [3, 200, "answer 3"],
    ]);
    // Waits of at least 40 ms, then 80 ms: lower bounds only, never an upper bound on speed.
    const started = delivery?.attempts.map((a) => Date.parse(a.startedAt)) ?? [];
    expect((started[1] ?? 0) - (started[0] ?? 0)).toBeGreaterThanOrEqual(39);
    expect((started[2] ?? 0) - (started[1] ?? 0)).toBeGreaterThanOrEqual(79);
  });

  it("sends a W3C traceparent: one trace for every attempt of a delivery, a new span id per attempt", async () => {
    const { app, emulator } = await setup({ retry: { initialDelayMs: 5, attempts: 3 } }, (n) => (n <= 2 ? 503 : 204), {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: false });
    await emulator.settled();
    const parents = app.requests.map((r) => String(r.headers.traceparent));
    for (const parent of parents) expect(parent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const traceOf = (parent: string) => parent.split("-")[1];
    const bodies = app.requests.map((r) => JSON.parse(r.body).id as string);
    // Per delivery (event id), one trace id over its attempts, and a span id per attempt.
    const traces = new Map<string, Set<string>>();
    for (const [i, id] of bodies.entries()) {
      traces.set(id, (traces.get(id) ?? new Set()).add(traceOf(parents[i] as string) as string));
    }
    expect([...traces.values()].map((set) => set.size)).toEqual([1, 1]);
    expect(new Set([...traces.values()].map((set) => [...set][0])).size).toBe(2);
    expect(new Set(parents).size).toBe(parents.length);
  });

  it("gives up after the configured number of attempts", async () => {
    const { app, emulator } = await setup({ retry: { initialDelayMs: 5, attempts: 4 } }, () => 503, {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await emulator.settled();
    expect(app.requests.length).toBe(4);
    expect(emulator.deliveries().map((d) => d.state)).toEqual(["failed"]);
    expect(attemptsOf(emulator)).toEqual([[503, 503, 503, 503]]);
  });

  it("counts a redirect as a failed attempt and does not follow it", async () => {
    const { app, emulator } = await setup({ retry: { initialDelayMs: 5, attempts: 2 } }, () => 302, {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await emulator.settled();
    expect([app.requests.length, attemptsOf(emulator)]).toEqual([2, [[302, 302]]]);
  });

  it("retries an attempt that times out", async () => {
    const { emulator } = await setup({ retry: { initialDelayMs: 5, attempts: 2, timeoutMs: 150 } }, (n) =>
      n === 1 ? "hang" : 204,
    );
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await emulator.settled();
    const hung = emulator.deliveries().find((d) => d.attempts.length === 2);
    expect(hung?.attempts.map((a) => a.status ?? a.error)).toEqual(["timeout after 150 ms", 204]);
    expect(hung?.state).toBe("succeeded");
  });

  it("retries a connection error, and records it", async () => {
    const app = await receiver();
    await app.close(); // nothing listens on its port any more
    const emulator = await createEmulator({ retry: { initialDelayMs: 5, attempts: 2 } });
    cleanup(() => emulator.close());
    await api(emulator, "POST", "/webhooks", { url: app.url, events: ["flag.updated"] });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await emulator.settled();
    expect(attemptsOf(emulator)).toEqual([["ECONNREFUSED", "ECONNREFUSED"]]);
  });

  it("stops a deleted webhook's pending deliveries at once (spec section 3)", async () => {
    const { app, emulator, webhook } = await setup({ retry: { initialDelayMs: 100, attempts: 10 } }, () => 500, {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await until(() => app.requests.length === 1);
    expect((await api(emulator, "DELETE", `/webhooks/${webhook.id}`)).status).toBe(204);
    expect(emulator.deliveries().map((d) => d.state)).toEqual(["cancelled"]);
    await emulator.settled();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(app.requests.length).toBe(1);
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: false });
    await emulator.settled();
    expect(app.requests.length).toBe(1);
  });

  it("aborts a deleted webhook's attempt that is on the wire", async () => {
    const { app, emulator, webhook } = await setup({ retry: { timeoutMs: 60_000 } }, () => "hang", {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await until(() => app.requests.length === 1);
    await api(emulator, "DELETE", `/webhooks/${webhook.id}`);
    await emulator.settled();
    expect(emulator.deliveries().map((d) => [d.state, d.attempts.length])).toEqual([["cancelled", 0]]);
  });
});

describe("redelivery and tampered copies", () => {
  it("redelivers the same bytes and signature, and sends a tampered copy with the old signature, never retried", async () => {
    const { app, emulator, webhook } = await setup({}, (_, req) => (req.body.includes('"tampered"') ? 401 : 204), {
      events: ["flag.updated"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await api(emulator, "PATCH", "/flags/f", { environment: "staging", on: true });
    await emulator.settled();
    const [original] = emulator.deliveries();
    if (!original) throw new Error("no delivery");
    const again = await call(emulator, "POST", `/_emulator/deliveries/${original.id}/redeliver`);
    expect([again.status, again.json.kind, again.json.of]).toEqual([202, "redelivery", original.id]);
    const tampered = await call(emulator, "POST", `/_emulator/deliveries/${original.id}/tampered-copy`);
    expect([tampered.status, tampered.json.kind]).toEqual([202, "tampered"]);
    await emulator.settled();
    expect(app.requests.length).toBe(3);
    const [first, second, third] = app.requests as [Received, Received, Received];
    expect(second.body).toBe(first.body);
    expect(second.headers[SIGNATURE_HEADER]).toBe(first.headers[SIGNATURE_HEADER]);
    expect(third.headers[SIGNATURE_HEADER]).toBe(first.headers[SIGNATURE_HEADER]);
    expect(JSON.parse(third.body)).toEqual({ ...JSON.parse(first.body), tampered: true });
    const signature = third.headers[SIGNATURE_HEADER];
    expect(await verifySignature({ secret: webhook.secret, payload: third.body, signature })).toBe(false);
    const byId = new Map(emulator.deliveries().map((d) => [d.id, d]));
    expect(byId.get(tampered.json.id)?.attempts.map((a) => a.status)).toEqual([401]);
    expect(byId.get(tampered.json.id)?.state).toBe("failed");
    expect((await call(emulator, "POST", "/_emulator/deliveries/dlv_nope/redeliver")).status).toBe(404);
  });

  it("will not redeliver to a deleted webhook", async () => {
    const { emulator, webhook } = await setup({}, undefined, { events: ["flag.created"] });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await emulator.settled();
    await api(emulator, "DELETE", `/webhooks/${webhook.id}`);
    const [delivery] = emulator.deliveries();
    const answer = await call(emulator, "POST", `/_emulator/deliveries/${delivery?.id}/redeliver`);
    expect([answer.status, answer.json.error.code]).toEqual([409, "webhook_deleted"]);
  });
});

describe("options", () => {
  it("refuses a state file it cannot read, naming it", async () => {
    const dir = makeTempDir(cleanup, "emulator-state-");
    const stateFile = join(dir, "state.json");
    writeFileSync(stateFile, "{ not json");
    await expect(createEmulator({ stateFile })).rejects.toThrow(
      new RegExp(
        `^flag-webhooks/emulator: option "stateFile": cannot read the state file ${stateFile}: it is not JSON \\(.+\\)$`,
      ),
    );
    writeFileSync(stateFile, '{ "version": 2 }');
    await expect(createEmulator({ stateFile })).rejects.toThrow("it is not a state file of this version");
    await expect(createEmulator({ stateFile: join(dir, "missing/state.json") })).rejects.toThrow(
      `cannot read the state file ${join(dir, "missing/state.json")}: its folder ${join(dir, "missing")} does not exist`,
    );
    await expect(createEmulator({ stateFile: dir })).rejects.toThrow(": it is a directory");
  });

  it("reports every change of a delivery to onDelivery", async () => {
    const seen: Delivery["state"][] = [];
    const { emulator } = await setup({ onDelivery: (d) => seen.push(d.state) }, (n) => (n === 1 ? 500 : 204), {
      events: ["flag.created"],
      environments: ["staging"],
    });
    await api(emulator, "POST", "/flags", { key: "f", type: "boolean" });
    await emulator.settled();
    expect(seen).toEqual(["pending", "pending", "succeeded"]);
  });

  it("keeps flags, webhooks, the token and pending deliveries in the state file across a restart", async () => {
    const dir = makeTempDir(cleanup, "emulator-state-");
    const stateFile = join(dir, "state.json");
    let up = false;
    const app = await receiver(() => (up ? 204 : 500));
    cleanup(app.close);

    const first = await createEmulator({ stateFile, retry: { initialDelayMs: 60_000 } });
    const { json: webhook } = await call(first, "POST", "/projects/shop/webhooks", {
      body: { url: app.url, events: ["flag.updated"] },
    });
    await call(first, "POST", "/projects/shop/flags", { body: { key: "f", type: "boolean" } });
    await call(first, "PATCH", "/projects/shop/flags/f", { body: { environment: "staging", on: true } });
    await until(() => app.requests.length === 1);
    await until(() => first.deliveries()[0]?.attempts.length === 1);
    await first.close();
    expect(statSync(stateFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(stateFile, "utf8")).toContain(webhook.secret);

    up = true;
    const second = await createEmulator({ stateFile });
    cleanup(() => second.close());
    expect(second.token).toBe(first.token);
    const { json } = await call(second, "GET", "/projects/shop/flags");
    expect(json.data.map((f: any) => [f.key, f.environments.staging.on])).toEqual([["f", true]]);
    await second.settled();
    expect(second.deliveries().map((d) => [d.state, d.attempts.map((a) => a.status)])).toEqual([
      ["succeeded", [500, 204]],
    ]);
    expect(app.requests.length).toBe(2);
    // The webhook came back with its secret: new changes are delivered, signed as before.
    await call(second, "PATCH", "/projects/shop/flags/f", { body: { environment: "staging", on: false } });
    await second.settled();
    const last = app.requests.at(-1) as Received;
    expect(
      await verifySignature({ secret: webhook.secret, payload: last.body, signature: last.headers[SIGNATURE_HEADER] }),
    ).toBe(true);
  });
});

// The sender in detail, on emulators of its own and endpoints that answer as each case needs.
const start = (options: EmulatorOptions = {}) => startEmulator(cleanup, options);

/** A real endpoint; `handle` answers request n (from 1) as it likes, or never. */
async function endpoint(handle: (n: number, res: ServerResponse, req: IncomingMessage) => void) {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    req.resume();
    req.on("end", () => handle(requests.length, res, req));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanup(async () => {
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
    const dir = makeTempDir(cleanup, "emulator-deliveries-");
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
