import type { Server } from "node:http";
import { parseEvent } from "flag-webhooks";
import { createEvent } from "flag-webhooks/testing";
import supertest from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp as createExpressApp } from "../../examples/express.js";
import { createHandler, serve } from "../../examples/fetch-node.js";
import { describeEvent } from "../../examples/handle-events.js";
import { createApp as createKoaApp } from "../../examples/koa.js";
import { createApp as createMetricsApp } from "../../examples/metrics.js";
import { signatureOf } from "../support/deliveries.js";
import { close, listen } from "../support/http.js";
import { vector } from "../support/vectors.js";

// Every runnable example, exercised the way its README section says to use it, so none can rot.
// The Bun, Deno and Cloudflare Worker examples run in their own runtimes in test/runtimes/; the
// framework examples with their adapter (fastify, nestjs), the queue and store ones with theirs.
const { secret, body, signature } = vector("flag-updated-compact");
const summary = "dana@example.com changed new-checkout in production (on: false → true)";

describe("examples", () => {
  it("express.ts receives a signed delivery and refuses a tampered one", async () => {
    const app = createExpressApp(secret);
    const ok = await supertest(app).post("/webhooks").set("service-signature", signature).send(body);
    expect(ok.body).toEqual({ received: "evt_01HZX3K9", summary });
    const bad = await supertest(app)
      .post("/webhooks")
      .set("service-signature", signature)
      .send(Buffer.from(`${body} `));
    expect([bad.status, bad.body.error.code]).toEqual([401, "invalid_signature"]);
  });

  it("koa.ts receives a signed delivery and refuses an unsigned one", async () => {
    const server = createKoaApp(secret).callback();
    const ok = await supertest(server).post("/").set("service-signature", signature).send(body);
    expect(ok.body).toEqual({ received: "evt_01HZX3K9", summary });
    const bad = await supertest(server).post("/").send(body);
    expect([bad.status, bad.body.error.code]).toEqual([401, "missing_signature"]);
  });

  describe("fetch-node.ts", () => {
    let server: Server;
    beforeAll(async () => {
      server = await listen(serve(createHandler(secret)));
    });
    afterAll(() => close(server));

    it("serves the fetch handler from a Node server", async () => {
      const ok = await supertest(server).post("/").set("service-signature", signature).send(body);
      expect(ok.body).toEqual({ received: "evt_01HZX3K9", summary });
      const get = await supertest(server).get("/");
      expect([get.status, get.headers.allow]).toEqual([405, "POST"]);
    });
  });

  it("nextjs route.ts loads without the secret, and its POST route handler verifies with it", async () => {
    // Loaded as `next build` loads it, without WEBHOOK_SECRET (the build itself: test/hosts/next-example.test.ts).
    delete process.env.WEBHOOK_SECRET;
    const { POST } = await import("../../examples/nextjs/app/webhooks/route.js");
    const request = (sig: string) =>
      new Request("http://localhost/webhooks", {
        method: "POST",
        headers: { "service-signature": sig },
        body: new Uint8Array(body),
      });
    process.env.WEBHOOK_SECRET = secret;
    try {
      expect((await POST(request(signature))).status).toBe(204);
      expect((await POST(request("0".repeat(64)))).status).toBe(401);
    } finally {
      delete process.env.WEBHOOK_SECRET;
    }
  });

  it.each([
    ["flag.updated", undefined, summary],
    ["flag.created", { flag: "beta" }, "flag.created beta"],
    ["flag.deleted", {}, "flag.deleted (unnamed flag)"],
    ["rollout.step", {}, "rollout.step in production"],
    ["rollout.guard_triggered", {}, "rollout.guard_triggered in production"],
    ["flag.archived", {}, "unhandled event type flag.archived"],
  ])("handle-events.ts describes a %s event", (type, data, expected) => {
    const event = JSON.parse(body.toString());
    event.type = type;
    if (data) event.data = data;
    expect(describeEvent(parseEvent(JSON.stringify(event)))).toBe(expected);
  });

  it("metrics.ts counts deliveries per matched secret and refusals per code, and never exposes a secret", async () => {
    const [NEW, OLD] = ["metrics-new-secret", "metrics-old-secret"];
    const { app } = createMetricsApp([NEW, OLD]);
    const post = (body: string, signature?: string) => {
      const request = supertest(app).post("/webhooks").set("content-type", "application/json");
      return (signature ? request.set("service-signature", signature) : request).send(body);
    };
    const a = JSON.stringify(createEvent("flag.updated", { id: "evt_a" }));
    const b = JSON.stringify(createEvent("flag.updated", { id: "evt_b" }));
    const stale = JSON.stringify(createEvent("flag.updated", { id: "evt_c", createdAt: "2020-01-01T00:00:00Z" }));
    expect((await post(a, await signatureOf(NEW, a))).status).toBe(204);
    expect((await post(b, await signatureOf(OLD, b))).status).toBe(204);
    expect((await post(b, await signatureOf(OLD, b))).status).toBe(204);
    expect((await post(a, await signatureOf("forger", a))).status).toBe(401);
    expect((await post(a)).status).toBe(401);
    expect((await post(stale, await signatureOf(NEW, stale))).status).toBe(401);

    const metrics = (await supertest(app).get("/metrics")).text;
    expect(metrics).toContain('flag_webhooks_verified_total{type="flag.updated",secret_index="0"} 2');
    expect(metrics).toContain('flag_webhooks_verified_total{type="flag.updated",secret_index="1"} 2');
    expect(metrics).toContain('flag_webhooks_rejected_total{code="invalid_signature",status="401"} 1');
    expect(metrics).toContain('flag_webhooks_rejected_total{code="missing_signature",status="401"} 1');
    expect(metrics).toContain('flag_webhooks_rejected_total{code="event_expired",status="401"} 1');
    for (const secret of [NEW, OLD]) expect(metrics).not.toContain(secret);
  });
});
