import {
  type FlagUpdatedEvent,
  MemoryDedupeStore,
  MemoryOrderStore,
  type OrderStore,
  STALE_HEADER,
  type WebhookEvent,
} from "flag-webhooks";
import { createEvent, signedRequest } from "flag-webhooks/testing";
import { describe, expect, it } from "vitest";
import { handler, type Options, recordingTelemetry, SECRET } from "../support/receiver.js";

const change = (path: string, to: unknown) => ({ path, from: null, to });
const updated = (id: string, createdAt: string, changes = [change("on", true)]) =>
  createEvent("flag.updated", { id, createdAt, data: { flag: "dark-mode", changes } });

/** A fetch receiver with `order` on a memory store, whose handler writes down what it saw. */
function ordered(options: Options & { fail?: (event: WebhookEvent) => boolean } = {}) {
  const seen: WebhookEvent[] = [];
  const store = new MemoryOrderStore();
  const handle = handler({
    order: { store },
    onEvent: (event) => {
      if (options.fail?.(event)) throw new Error("the handler failed");
      seen.push(event);
    },
    ...options,
  });
  const send = async (event: object) => handle(await signedRequest({ secret: SECRET, event }));
  return { seen, send, store };
}

describe("order", () => {
  it("shows the handler only the changes newer than those applied, and the stale ones apart", async () => {
    const { seen, send } = ordered();
    await send(updated("evt_2", "2026-11-21T09:02:00Z", [change("on", true)]));
    const late = await send(updated("evt_1", "2026-11-21T09:01:00Z", [change("on", false), change("rules", [1])]));
    expect(late.status).toBe(204);
    expect(late.headers.get(STALE_HEADER)).toBeNull();
    const event = seen[1] as FlagUpdatedEvent;
    expect(event.data.changes).toEqual([change("rules", [1])]);
    expect(event.staleChanges).toEqual([change("on", false)]);
  });

  it("answers an event all of whose changes are stale 204 with Webhook-Stale, without the handler, recorded as stale", async () => {
    const { log, telemetry } = recordingTelemetry();
    const { seen, send } = ordered({ telemetry });
    await send(updated("evt_2", "2026-11-21T09:02:00Z"));
    const late = await send(updated("evt_1", "2026-11-21T09:01:00Z"));
    expect([late.status, late.headers.get(STALE_HEADER)]).toEqual([204, "true"]);
    expect(seen.map((event) => event.id)).toEqual(["evt_2"]);
    expect(log.filter((line) => line.startsWith("end"))).toEqual(["end handled 204", "end stale 204"]);
  });

  it("calls the handler for a wholly stale event too with handleStale", async () => {
    const store = new MemoryOrderStore();
    const { seen, send } = ordered({ order: { store, handleStale: true } });
    await send(updated("evt_2", "2026-11-21T09:02:00Z"));
    await send(updated("evt_1", "2026-11-21T09:01:00Z"));
    expect((seen[1] as FlagUpdatedEvent).data.changes).toEqual([]);
    expect((seen[1] as FlagUpdatedEvent).staleChanges).toEqual([change("on", true)]);
  });

  it("records positions only once the delivery is handled: a failed newer event does not make an older one stale", async () => {
    const { seen, send } = ordered({ fail: (event) => event.id === "evt_2" });
    expect((await send(updated("evt_2", "2026-11-21T09:02:00Z"))).status).toBe(500);
    const older = await send(updated("evt_1", "2026-11-21T09:01:00Z"));
    expect([older.status, older.headers.get(STALE_HEADER)]).toEqual([204, null]);
    expect(seen.map((event) => event.id)).toEqual(["evt_1"]);
  });

  it("answers 503 and releases the dedupe claim when the store fails, so the sender's retry runs it", async () => {
    let down = true;
    const memory = new MemoryOrderStore();
    const store: OrderStore = {
      retention: memory.retention,
      hold: (flag, lease) => (down ? Promise.reject(new Error("store down")) : memory.hold(flag, lease)),
    };
    const { seen, send } = ordered({ order: { store }, dedupe: { store: new MemoryDedupeStore(), ttl: "1h" } });
    const event = updated("evt_1", "2026-11-21T09:01:00Z");
    const refused = await send(event);
    expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "10"]);
    down = false;
    expect((await send(event)).status).toBe(204);
    expect(seen).toHaveLength(1);
  });

  it("passes unknown types and events without a flag untouched", async () => {
    const { seen, send } = ordered();
    await send({ ...createEvent("flag.created"), type: "flag.archived" });
    await send({ ...createEvent("flag.deleted"), data: {} });
    expect(seen.map((event) => event.type)).toEqual(["unknown", "flag.deleted"]);
  });

  it("refuses a store whose retention is shorter than maxAge allows", () => {
    expect(() => handler({ maxAge: "1h", order: { store: new MemoryOrderStore({ retention: 60_000 }) } })).toThrow(
      /retention/,
    );
  });
});
