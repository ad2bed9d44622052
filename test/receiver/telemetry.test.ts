import { createServer } from "node:http";
import express from "express";
import { MemoryDedupeStore } from "flag-webhooks";
import { webhookMiddleware as expressMiddleware } from "flag-webhooks/express";
import { describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { post, serverPerTest } from "../support/http.js";
import { handler, recordingStore, recordingTelemetry, request, SECRET } from "../support/receiver.js";

// What the receiver tells a Telemetry about each delivery, in order: verified, each store
// operation, the handler, and the end with the outcome and the status the sender got. The
// OpenTelemetry implementation of it: test/otel/.

const serve = serverPerTest();

describe("what telemetry hears", () => {
  it("telemetry hears a refusal that is no WebhookError as handler_error 500", async () => {
    const { log, telemetry } = recordingTelemetry();
    const answer = await handler({ telemetry, maxAge: "5m", now: () => Number.NaN })(await request());
    expect(answer.status).toBe(500);
    expect(log).toEqual(["verified", "end handler_error 500"]);
  });

  it("telemetry hears a reply that cannot be sent as the 500 the client gets", async () => {
    const { log, telemetry } = recordingTelemetry();
    const answer = await handler({ telemetry, onEvent: () => ({ status: 600 }) })(await request());
    expect(answer.status).toBe(500);
    expect(log).toEqual(["verified", "handler", "end handler_error 500"]);
  });

  it("telemetry hears the claim of a store that fails, and the complete of one that keeps failing", async () => {
    const down = recordingTelemetry();
    const store = { ...recordingStore(), claim: () => Promise.reject(new Error("down")) };
    await handler({ telemetry: down.telemetry, dedupe: { store, ttl: "1h" } })(await request());
    expect(down.log).toEqual(["verified", "store claim", "end store_unavailable 503"]);
    const readonly = recordingTelemetry();
    const failing = { ...recordingStore(), complete: () => Promise.reject(new Error("READONLY")) };
    await handler({ telemetry: readonly.telemetry, dedupe: { store: failing, ttl: "1h", timeout: 40 } })(
      await request(),
    );
    expect(readonly.log).toEqual(["verified", "store claim", "handler", "store complete", "end handled 204"]);
  });

  it("res.destroy() by the route ends with no status (none was sent), not the 500 of a handler that threw", async () => {
    const { log, telemetry } = recordingTelemetry();
    const app = express();
    app.post(
      "/webhooks",
      expressMiddleware({ secret: SECRET, dedupe: { store: new MemoryDedupeStore(), ttl: 60_000 }, telemetry }),
      (_req, res) => res.destroy(),
    );
    const server = await serve(createServer(app));
    await expect(post(server, await delivery(SECRET))).rejects.toThrow(); // the sender sees the connection cut
    await expect.poll(() => log.at(-1), { timeout: 2000 }).toMatch(/^end /);
    expect(log).toEqual(["verified", "store claim", "handler", "store release", "end handler_error undefined"]);
  });
});
