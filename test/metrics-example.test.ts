import { createHmac } from "node:crypto";
import supertest from "supertest";
import { describe, expect, it } from "vitest";
import { createApp } from "../examples/metrics.js";

// examples/metrics.ts, scraped the way Prometheus would after a rotation's mixed traffic.
const [NEW, OLD] = ["metrics-new-secret", "metrics-old-secret"];
const delivery = (id: string, createdAt = new Date().toISOString()) =>
  JSON.stringify({
    id,
    type: "flag.updated",
    createdAt,
    environment: "production",
    data: { flag: "f", changes: [], actor: { type: "user", email: "dana@example.com" } },
  });
const sign = (body: string, secret: string) => createHmac("sha256", secret).update(body).digest("hex");

describe("examples/metrics.ts", () => {
  it("counts deliveries per matched secret and refusals per code, and never exposes a secret", async () => {
    const { app } = createApp([NEW, OLD]);
    const post = (body: string, signature?: string) => {
      const request = supertest(app).post("/webhooks").set("content-type", "application/json");
      return (signature ? request.set("service-signature", signature) : request).send(body);
    };
    const a = delivery("evt_a");
    const b = delivery("evt_b");
    const stale = delivery("evt_c", "2020-01-01T00:00:00Z");
    expect((await post(a, sign(a, NEW))).status).toBe(204);
    expect((await post(b, sign(b, OLD))).status).toBe(204);
    expect((await post(b, sign(b, OLD))).status).toBe(204);
    expect((await post(a, sign(a, "forger"))).status).toBe(401);
    expect((await post(a)).status).toBe(401);
    expect((await post(stale, sign(stale, NEW))).status).toBe(401);

    const metrics = (await supertest(app).get("/metrics")).text;
    expect(metrics).toContain('flag_webhooks_verified_total{type="flag.updated",secret_index="0"} 2');
    expect(metrics).toContain('flag_webhooks_verified_total{type="flag.updated",secret_index="1"} 2');
    expect(metrics).toContain('flag_webhooks_rejected_total{code="invalid_signature",status="401"} 1');
    expect(metrics).toContain('flag_webhooks_rejected_total{code="missing_signature",status="401"} 1');
    expect(metrics).toContain('flag_webhooks_rejected_total{code="event_expired",status="401"} 1');
    for (const secret of [NEW, OLD]) expect(metrics).not.toContain(secret);
  });
});
