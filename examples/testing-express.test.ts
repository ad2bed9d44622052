// Testing your own receiver with flag-webhooks/testing: the Express app of express.ts, tested the
// way you would test yours, with supertest and vitest (any test runner works the same way).
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import supertest from "supertest";
import { describe, expect, it } from "vitest";
import { createApp } from "./express.js";

const secret = "test-secret"; // the secret your app is configured with in tests
const app = createApp(secret);

describe("POST /webhooks", () => {
  it("handles a flag.updated event", async () => {
    const event = createEvent("flag.updated", {
      data: { flag: "dark-mode", changes: [{ path: "rollout.percent", from: 10, to: 50 }] },
    });
    const { body, headers } = await signedDelivery({ secret, event });

    const response = await supertest(app).post("/webhooks").set(headers).send(body);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      received: event.id,
      summary: "dana@example.com changed dark-mode in production (rollout.percent: 10 → 50)",
    });
  });

  it("accepts every event type the service sends", async () => {
    for (const type of ["flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"] as const) {
      const { body, headers } = await signedDelivery({ secret, event: createEvent(type) });
      const response = await supertest(app).post("/webhooks").set(headers).send(body);
      expect([type, response.status]).toEqual([type, 200]);
    }
  });

  it("refuses a delivery signed with another secret", async () => {
    const { body, headers } = await signedDelivery({ secret: "not-the-secret", event: createEvent("flag.updated") });

    const response = await supertest(app).post("/webhooks").set(headers).send(body);

    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe("invalid_signature");
  });

  it("refuses an authentic body that is not a valid event", async () => {
    const { body, headers } = await signedDelivery({ secret, body: '{"id": "evt_1"}' });

    const response = await supertest(app).post("/webhooks").set(headers).send(body);

    expect([response.status, response.body.error.code]).toEqual([400, "invalid_payload"]);
  });
});
